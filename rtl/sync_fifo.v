// Synchronous FIFO with an AXI-Stream style read side and a registered "room" flag.
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// The read side presents the head word combinationally from the storage (LUTRAM on 7-series),
// so m_valid/m_data are valid the cycle after a write. `room` is registered and is true while
// more than MARGIN entries are free: an upstream that stops accepting input when `room` falls
// can still land MARGIN words already in flight, so no word is ever lost and no ready signal
// depends combinationally on the downstream ready.
//
// Two resets (docs/timing.md "Reset"): `rst_n` clears the whole FIFO; `port_rst_n`, the raw
// AXI-Stream ARESETn where m_valid or room drives a port, clears those two flags alone, so the
// port shows TVALID (and TREADY) low in the cycle after ARESETn is sampled low, as AXI4-Stream
// requires, while the pointers follow the registered rst_n (rst_n <= port_rst_n, one cycle
// later: then the whole FIFO is cleared). Tie port_rst_n to 1'b1 where neither is a port.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module sync_fifo #
(
    // Word width in bits
    parameter WIDTH = 33,
    // log2 of the number of entries
    parameter ADDR_W = 5,
    // Free entries that must remain for `room` to be true (in-flight words upstream)
    parameter MARGIN = 8
)
(
    input  wire             clk,
    input  wire             rst_n,
    input  wire             port_rst_n,

    input  wire             wr_en,
    input  wire [WIDTH-1:0] wr_data,

    output wire [WIDTH-1:0] m_data,
    output wire             m_valid,
    input  wire             m_ready,

    output reg              room
);

localparam DEPTH = 1 << ADDR_W;

initial begin
    if (ADDR_W < 1 || ADDR_W > 16) begin
        $display("sync_fifo: ADDR_W=%0d out of range 1..16", ADDR_W);
        $finish;
    end
    if (MARGIN + 1 >= DEPTH) begin
        $display("sync_fifo: MARGIN=%0d leaves no room in %0d entries", MARGIN, DEPTH);
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:DEPTH-1];
reg [ADDR_W:0]  wr_ptr;
reg [ADDR_W:0]  rd_ptr;
reg [ADDR_W:0]  count;    // wr_ptr - rd_ptr, kept as a register
reg             vld;      // count != 0
reg             one;      // count == 1

wire do_rd = vld && m_ready;

assign m_valid = vld;
assign m_data  = mem[rd_ptr[ADDR_W-1:0]];

always @(posedge clk) begin
    if (wr_en) begin
        mem[wr_ptr[ADDR_W-1:0]] <= wr_data;
    end
end

// every flag is updated from registers and the two strobes, so no path goes through a
// pointer comparison into a pointer (the one-word-per-cycle step keeps count == 1 and
// count == 2 enough to know when the FIFO runs empty)
always @(posedge clk) begin
    if (!rst_n) begin
        wr_ptr <= 0;
        rd_ptr <= 0;
        count  <= 0;
        vld    <= 1'b0;
        one    <= 1'b0;
        room   <= 1'b0;
    end else begin
        if (wr_en) begin
            wr_ptr <= wr_ptr + 1'b1;
            // synthesis translate_off
            if (count == DEPTH && !do_rd) begin
                $display("ERROR: %m: write to a full FIFO at %0t, a word is lost", $time);
            end
            // synthesis translate_on
        end
        if (do_rd) begin
            rd_ptr <= rd_ptr + 1'b1;
        end
        if (wr_en && !do_rd) begin
            count <= count + 1'b1;
            vld   <= 1'b1;
            one   <= !vld;
        end else if (!wr_en && do_rd) begin
            count <= count - 1'b1;
            vld   <= !one;
            one   <= (count == 2);
        end
        room <= (count < DEPTH - MARGIN);
    end
    // the port flags: low in the cycle after the raw reset is sampled low
    if (!port_rst_n) begin
        vld  <= 1'b0;
        room <= 1'b0;
    end
end

endmodule

`resetall
