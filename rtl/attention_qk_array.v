// attention_qk_array: the K-pass products of the attention engine.
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// G x BB products q[g][j] * k[j], INT8 x INT8 signed at their natural width (one DSP48E1
// each), registered (stage K2). Byte j of head g's q slice is q[(g*BB+j)*8 +: 8]; byte j of
// the K beat is k[8*j +: 8]; product (g, j) is prod[(g*BB+j)*16 +: 16]. The per-head sums are
// the generated adder trees (generators/adder_tree.py) that follow.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_qk_array #
(
    // Query heads
    parameter G = 3,
    // Bytes per K beat
    parameter BB = 8
)
(
    input  wire                 clk,
    input  wire [G*BB*8-1:0]    q,
    input  wire [BB*8-1:0]      k,
    output wire [G*BB*16-1:0]   prod
);

initial begin
    if (G < 1 || BB < 1) begin
        $display("attention_qk_array: illegal G=%0d BB=%0d", G, BB);
        $finish;
    end
end

genvar g, j;
generate
for (g = 0; g < G; g = g + 1) begin : g_head
    for (j = 0; j < BB; j = j + 1) begin : g_byte
        wire signed [7:0] qs = q[(g*BB+j)*8 +: 8];
        wire signed [7:0] ks = k[8*j +: 8];
        (* use_dsp = "yes" *) reg signed [15:0] p;
        always @(posedge clk) begin
            p <= qs * ks;
        end
        assign prod[(g*BB+j)*16 +: 16] = p;
    end
end
endgenerate

endmodule

`resetall
