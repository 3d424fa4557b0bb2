// Joiner: two 64-bit half streams of one attention frame -> one 128-bit stream.
//
// Part of the ternary-pynq overlay (hand-written, parameterized; not generated).
// Contract: docs/overlay.md. Side A carries bytes 16i..16i+7 of each 16-byte beat (the
// low half, from port 0), side B bytes 16i+8..16i+15 (port 1). One beat of each side makes one
// output beat, A in the low half; tlast = a_last | b_last. When one side's tlast comes first,
// the rest of the other side, up to and including its own tlast, is discarded, so the next
// frame starts paired again. The output is a register slice (axis_skid): a_ready and b_ready
// depend on the other side's registered valid and the slice's registered ready only.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module axis_join2 #
(
    // Width of each half
    parameter DW = 64
)
(
    input  wire            clk,
    input  wire            rst_n,

    input  wire [DW-1:0]   a_data,
    input  wire            a_last,
    input  wire            a_valid,
    output wire            a_ready,

    input  wire [DW-1:0]   b_data,
    input  wire            b_last,
    input  wire            b_valid,
    output wire            b_ready,

    output wire [2*DW-1:0] m_data,
    output wire            m_last,
    output wire            m_valid,
    input  wire            m_ready
);

initial begin
    if (DW < 1) begin
        $display("axis_join2: DW=%0d must be >= 1", DW);
        $finish;
    end
end

reg  drain_a;   // discarding side A up to its tlast (side B ended first)
reg  drain_b;   // discarding side B up to its tlast (side A ended first)

// a_ready, b_ready and pair each one LUT of registers (kept nets: synthesis would otherwise
// share terms between them and put the readies, which enable the input slices' whole data
// registers, three LUT levels deep; docs/timing.md)
wire o_ready;
(* keep *) wire pair;
(* keep *) wire a_ready_w;
(* keep *) wire b_ready_w;
assign pair      = a_valid && b_valid && !drain_a && !drain_b;
assign a_ready_w = drain_a || (!drain_b && b_valid && o_ready);
assign b_ready_w = drain_b || (!drain_a && a_valid && o_ready);
wire join_hs = pair && o_ready;

assign a_ready = a_ready_w;
assign b_ready = b_ready_w;

always @(posedge clk) begin
    if (!rst_n) begin
        drain_a <= 1'b0;
        drain_b <= 1'b0;
    end else begin
        if (join_hs) begin
            drain_a <= b_last && !a_last;
            drain_b <= a_last && !b_last;
        end
        if (drain_a && a_valid && a_last) begin
            drain_a <= 1'b0;
        end
        if (drain_b && b_valid && b_last) begin
            drain_b <= 1'b0;
        end
    end
end

axis_skid #(.DATA_W(2 * DW)) out_slice (
    .clk(clk), .rst_n(rst_n), .port_rst_n(1'b1),
    .s_data({b_data, a_data}), .s_last(a_last || b_last), .s_valid(pair), .s_ready(o_ready),
    .m_data(m_data), .m_last(m_last), .m_valid(m_valid), .m_ready(m_ready)
);

endmodule

`resetall
