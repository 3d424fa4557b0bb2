// attention_pv_array: the V-pass multiply-accumulate array of the attention engine.
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// G x BB lanes; lane (g, j) multiplies head g's weight p_g (W bits unsigned) by byte j of the
// V beat (signed) on one DSP48E1, (W + 1) x 8 bits signed at its natural width, and adds the
// product into its accumulator acc[g][j] held in LUTRAM at address {bank, beat in row}
// (read-modify-write; a row's beats visit different addresses, so the one-cycle loop never
// collides; the bank bit lets the finisher read one frame while the next one accumulates).
//
// Timing: p and v at cycle c (stage M0); the product is registered (M1); m1_valid, m1_row0
// and m1_addr belong to cycle c + 1; the new accumulator value is written and registered on
// `sum` at c + 2. rd_data is acc[rd_addr] (asynchronous LUTRAM read) for the finisher.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_pv_array #
(
    // Query heads (weights per beat)
    parameter G = 3,
    // Bytes per V beat
    parameter BB = 8,
    // Weight width in bits (unsigned)
    parameter W = 24,
    // Accumulator width in bits (signed, >= W + 9)
    parameter AB = 43,
    // Accumulator address bits: {bank, beat in row}
    parameter RBA = 4
)
(
    input  wire                 clk,

    input  wire [G*W-1:0]       p,          // M0: weight of head g in p[g*W +: W]
    input  wire [8*BB-1:0]      v,          // M0: V beat, byte j in v[8*j +: 8]

    input  wire                 m1_valid,   // M1: write the accumulators
    input  wire                 m1_row0,    // M1: first row (start from zero)
    input  wire [RBA-1:0]       m1_addr,    // M1: {bank, beat in row}

    output wire [G*BB*AB-1:0]   sum,        // M2: lane (g, j) in sum[(g*BB+j)*AB +: AB]
    input  wire [RBA-1:0]       rd_addr,
    output wire [G*BB*AB-1:0]   rd_data     // acc[rd_addr], same lane order
);

localparam MPW = W + 9;   // product width

initial begin
    if (G < 1 || BB < 1 || W < 2 || W > 24 || AB < MPW || RBA < 1) begin
        $display("attention_pv_array: illegal G=%0d BB=%0d W=%0d AB=%0d RBA=%0d", G, BB, W, AB, RBA);
        $finish;
    end
end

genvar g, j;
generate
for (g = 0; g < G; g = g + 1) begin : g_head
    wire signed [W:0] ps = {1'b0, p[g*W +: W]};
    for (j = 0; j < BB; j = j + 1) begin : g_byte
        wire signed [7:0] vs = v[8*j +: 8];
        (* use_dsp = "yes" *) reg signed [MPW-1:0] prod;
        reg  [AB-1:0] acc [0:(1 << RBA)-1];
        reg  [AB-1:0] s;
        wire [AB-1:0] pext;
        if (AB > MPW) begin : g_ext
            assign pext = {{(AB-MPW){prod[MPW-1]}}, prod};
        end else begin : g_noext
            assign pext = prod;
        end
        wire [AB-1:0] na = (m1_row0 ? {AB{1'b0}} : acc[m1_addr]) + pext;
        always @(posedge clk) begin
            prod <= ps * vs;
            if (m1_valid) begin
                acc[m1_addr] <= na;
            end
            s <= na;
        end
        assign sum[(g*BB+j)*AB +: AB]     = s;
        assign rd_data[(g*BB+j)*AB +: AB] = acc[rd_addr];
    end
end
endgenerate

endmodule

`resetall
