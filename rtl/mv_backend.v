// Back end shared by every matrix-vector engine: sideband delay, accumulator, result FIFO,
// status word (DESIGN.md section 3).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// The sideband from the stream controller (valid, first, last, end-of-frame, status) is
// delayed by LANE_LAT cycles, the lane's latency as computed by the generator, so it meets the
// lane's partial sum. On the last beat of a row the accumulated sum is written to the result
// FIFO; on the end-of-frame token the status word follows it, in order, through the same FIFO.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module mv_backend #
(
    // Width of the lane's signed partial sum
    parameter PSUM_W = 18,
    // Lane latency in cycles (from the generator's latency figure)
    parameter LANE_LAT = 3,
    // log2 of the result FIFO depth
    parameter FIFO_ADDR_W = 5,
    // Words that can still arrive after `room` falls (from the generator)
    parameter FIFO_MARGIN = 8
)
(
    input  wire              aclk,
    input  wire              aresetn,

    // sideband from the stream controller (stage 1)
    input  wire              sb_valid,
    input  wire              sb_first,
    input  wire              sb_last,
    input  wire              sb_eof,
    input  wire [15:0]       sb_status,

    // from the lane, LANE_LAT cycles after stage 1
    input  wire signed [PSUM_W-1:0] psum,
    input  wire              psum_ci,     // one more to add (a carry the lane's tree had no adder for)
    input  wire              lane_bad,

    output wire              room,

    output wire [31:0]       m_axis_tdata,
    output wire [3:0]        m_axis_tkeep,
    output wire              m_axis_tvalid,
    input  wire              m_axis_tready,
    output wire              m_axis_tlast
);

initial begin
    if (PSUM_W < 2 || PSUM_W > 32) begin
        $display("mv_backend: PSUM_W=%0d out of range 2..32", PSUM_W);
        $finish;
    end
    if (LANE_LAT < 0) begin
        $display("mv_backend: LANE_LAT=%0d must be >= 0", LANE_LAT);
        $finish;
    end
end

// the sideband through the lane's latency; a FIFO write is decided before the delay (d_wr, and
// d_kind: 0 a row result, 1 the status word), so one write per cycle is all the delay can hold
wire        d_valid, d_first;
wire        d_wr, d_kind;
wire [15:0] d_status;

delay_line #(
    .WIDTH(20),
    .CTRL_W(2),
    .DEPTH(LANE_LAT)
) sideband (
    .clk(aclk),
    .rst_n(aresetn),
    .d({sb_status, sb_first, sb_eof, sb_eof || (sb_valid && sb_last), sb_valid}),
    .q({d_status, d_first, d_kind, d_wr, d_valid})
);

reg  signed [31:0] acc;
reg  [15:0]        count;
reg                bad_seen;
wire signed [31:0] acc_next = (d_first ? 32'sd0 : acc) + {{(32-PSUM_W){psum[PSUM_W-1]}}, psum}
                            + {31'd0, psum_ci};
wire               bad_now  = bad_seen | (d_valid & lane_bad);

wire        wr_res    = d_wr && !d_kind;
wire        wr_status = d_wr && d_kind;
wire [32:0] wr_word   = d_kind
                      ? {1'b1, count, d_status[15:8] | {2'b00, bad_now, 5'b00000}, d_status[7:0]}
                      : {1'b0, acc_next};

always @(posedge aclk) begin
    if (d_valid) begin
        acc <= acc_next;
    end
    if (!aresetn) begin
        count    <= 16'd0;
        bad_seen <= 1'b0;
    end else if (wr_status) begin
        count    <= 16'd0;
        bad_seen <= 1'b0;
    end else begin
        bad_seen <= bad_now;
        if (wr_res) count <= count + 1'b1;
    end
end

wire [32:0] head;

sync_fifo #(
    .WIDTH(33),
    .ADDR_W(FIFO_ADDR_W),
    .MARGIN(FIFO_MARGIN)
) results (
    .clk(aclk),
    .rst_n(aresetn),
    .wr_en(d_wr),
    .wr_data(wr_word),
    .m_data(head),
    .m_valid(m_axis_tvalid),
    .m_ready(m_axis_tready),
    .room(room)
);

assign m_axis_tdata = head[31:0];
assign m_axis_tlast = head[32];
assign m_axis_tkeep = 4'hF;

endmodule

`resetall
