// AXI-Stream register slice with a skid buffer: every output of both sides is a register.
//
// Part of the ternary-pynq overlay (hand-written, parameterized; not generated).
// The verilog-axis `axis_register` (REG_TYPE 2) structure: an output register and a temporary
// register that catches the beat accepted in the cycle the output stalls. s_ready is a
// register, so no combinational path runs from m_ready to s_ready, nor from any input to
// m_valid or m_data. Full throughput: one beat per clock with m_ready high.
//
// Two resets (docs/timing.md "Reset"): the three flags clear while either is low. `rst_n` is
// the block's registered reset; `port_rst_n` the raw AXI-Stream ARESETn where s_ready or m_valid
// is a port (the flags then fall in the cycle after ARESETn is sampled low, as AXI4-Stream
// requires), 1'b1 where the slice is inside the glue.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module axis_skid #
(
    // Payload width in bits (tdata and any sideband packed together, tlast separate)
    parameter DATA_W = 64
)
(
    input  wire              clk,
    input  wire              rst_n,
    input  wire              port_rst_n,

    input  wire [DATA_W-1:0] s_data,
    input  wire              s_last,
    input  wire              s_valid,
    output wire              s_ready,

    output wire [DATA_W-1:0] m_data,
    output wire              m_last,
    output wire              m_valid,
    input  wire              m_ready
);

initial begin
    if (DATA_W < 1) begin
        $display("axis_skid: DATA_W=%0d must be >= 1", DATA_W);
        $finish;
    end
end

reg              s_ready_reg;
reg [DATA_W:0]   out_reg;
reg              out_valid;
reg [DATA_W:0]   tmp_reg;
reg              tmp_valid;

// ready next cycle: the output will move, or both registers will not be full
wire s_ready_early = m_ready || (!tmp_valid && (!out_valid || !s_valid));

reg out_valid_next;

always @* begin
    out_valid_next = out_valid;
    if (s_ready_reg) begin
        if (m_ready || !out_valid) begin
            out_valid_next = s_valid;           // the input word goes to the output register
        end
    end else if (m_ready) begin
        out_valid_next = tmp_valid;             // the temporary word moves to the output
    end
end

// the temporary register fills when an input word arrives while the output stalls, and
// empties when the output moves; s_ready high means it is empty (the proof's skid_inv_ready),
// so its next state is one LUT of m_ready and four flags (a kept net: not computed behind the
// output register's wide enable out_load; docs/timing.md)
(* keep *) wire tmp_valid_next;
assign tmp_valid_next = !m_ready && (s_ready_reg ? (out_valid && s_valid) : tmp_valid);

// The data registers' enables do not wait for m_ready where they need not (docs/timing.md):
// the temporary register takes every input word while s_ready is high (it only counts once
// tmp_valid says so, and s_ready high means it is empty), and the output register loads
// whenever it may change, from the input while s_ready is high, else from the temporary
// register (loading it while out_valid is low is harmless: its word is not shown).
// out_load enables the whole output register (DATA_W + 1 loads): a kept net of its own, so
// the flags' next state is computed from m_ready, not behind that wide net (docs/timing.md)
(* keep *) wire out_load;
assign out_load = m_ready || !out_valid;

always @(posedge clk) begin
    if (out_load) begin
        out_reg <= s_ready_reg ? {s_last, s_data} : tmp_reg;
    end
    if (s_ready_reg) begin
        tmp_reg <= {s_last, s_data};
    end
    if (!rst_n || !port_rst_n) begin
        s_ready_reg <= 1'b0;
        out_valid   <= 1'b0;
        tmp_valid   <= 1'b0;
    end else begin
        s_ready_reg <= s_ready_early;
        out_valid   <= out_valid_next;
        tmp_valid   <= tmp_valid_next;
    end
end

assign s_ready = s_ready_reg;
assign m_valid = out_valid;
assign m_data  = out_reg[DATA_W-1:0];
assign m_last  = out_reg[DATA_W];

endmodule

`resetall
