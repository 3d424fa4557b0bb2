// Pipelined non-restoring divider: one division per clock, QB quotient bits, latency QB + 1.
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// Computes q = floor(n / d) and r = n - q * d for a numerator whose quotient is known to fit
// in QB bits (n < d * 2^QB); the caller guarantees that bound (and handles d = 0). Stage 0
// registers the inputs, stages 1..QB each decide one quotient bit, most significant first.
// SW sideband bits travel with the division (bit 0 is the valid flag, cleared by reset).
//
// Long-division form, non-restoring: the partial remainder r stays in [-d, d), DW + 1 bits
// signed. Stage 0 loads it with n >> QB (< d by the caller's bound) and keeps the low QB
// numerator bits in a shift register; each stage appends the next numerator bit and subtracts
// d (r >= 0) or adds it (r < 0) in one DW + 3 bit addition whose operand inversion and carry-in
// sit in the adder's own LUTs, so a stage is one LUT level and one carry chain. The quotient
// bit is 1 when the new r is >= 0 (the restoring divider's bit); it shifts in where the
// numerator bit left. out_r, the true remainder (r, or r + d when r < 0), is combinational
// from the last stage's registers: one addition of registers, then a 2:1 choice by r's sign.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_div_pipe #
(
    // Numerator width in bits
    parameter NW = 50,
    // Denominator width in bits
    parameter DW = 42,
    // Quotient bits (the quotient must be below 2^QB)
    parameter QB = 8,
    // Sideband bits carried along (not counting the valid flag)
    parameter SW = 2,
    // Bits of a piece of out_rza, out_rzr
    parameter ZP = 6
)
(
    input  wire          clk,
    input  wire          rst_n,

    input  wire          in_valid,
    input  wire [NW-1:0] in_n,
    input  wire [DW-1:0] in_d,
    input  wire [SW-1:0] in_side,

    output wire          out_valid,
    output wire [QB-1:0] out_q,
    output wire [DW-1:0] out_r,
    // out_r's pieces tested for zero, without the choice that forms out_r: bit i of out_rza
    // (out_rzr): bits [ZP*i +: ZP] of r + d (of r) are not all zero; out_rneg: r < 0, so piece
    // i of out_r is nonzero when (out_rneg ? out_rza[i] : out_rzr[i])
    output wire [(DW+ZP-1)/ZP-1:0] out_rza,
    output wire [(DW+ZP-1)/ZP-1:0] out_rzr,
    output wire          out_rneg,
    output wire [SW-1:0] out_side
);

localparam CW = (NW > DW + QB) ? NW : DW + QB;

initial begin
    if (NW < 1 || DW < 1 || QB < 2 || SW < 1) begin
        $display("attention_div_pipe: illegal NW=%0d DW=%0d QB=%0d SW=%0d", NW, DW, QB, SW);
        $finish;
    end
end

// numerator zero-extended; its bits above DW + QB are zero by the caller's bound
/* verilator lint_off UNUSEDSIGNAL */
wire [CW-1:0] nz = {{(CW-NW){1'b0}}, in_n};
/* verilator lint_on UNUSEDSIGNAL */

reg          v   [0:QB];
reg [DW:0]   rem [0:QB];   // partial remainder, signed, in [-d, d)
// numerator bits still to come (top) and quotient bits (bottom): flip-flops, not shift-register
// LUTs (an SRL's clock-to-out is 1.47 ns, and its output feeds each step's adder;
// `keep` for yosys, `shreg_extract` for Vivado; docs/timing.md)
(* shreg_extract = "no" *) reg [QB-1:0] nq  [0:QB];
reg [DW-1:0] den [0:QB];
reg [SW-1:0] sd  [0:QB];

// stage i: t = 2 r + next numerator bit; r' = t - d if r >= 0, else t + d
/* verilator lint_off UNUSEDSIGNAL */
wire [DW+1:0] t    [0:QB-1];
wire [DW+1:0] dx   [0:QB-1];
wire [DW+2:0] sum  [0:QB-1];
/* verilator lint_on UNUSEDSIGNAL */
genvar s;
generate
for (s = 0; s < QB; s = s + 1) begin : g_st
    wire sub = ~rem[s][DW];
    assign t[s]   = {rem[s], nq[s][QB-1]};
    assign dx[s]  = {2'b00, den[s]} ^ {(DW+2){sub}};
    // {t, 1} + {dx, sub}: the carry-in `sub` rides on bit 0
    assign sum[s] = {t[s], 1'b1} + {dx[s], sub};
end
endgenerate

integer i;
always @(posedge clk) begin
    v[0]   <= in_valid;
    rem[0] <= {1'b0, nz[DW+QB-1:QB]};
    den[0] <= in_d;
    sd[0]  <= in_side;
    for (i = 0; i < QB; i = i + 1) begin
        v[i+1]   <= v[i];
        den[i+1] <= den[i];
        sd[i+1]  <= sd[i];
        rem[i+1] <= sum[i][DW+1:1];
    end
    if (!rst_n) begin
        for (i = 0; i <= QB; i = i + 1) begin
            v[i] <= 1'b0;
        end
    end
end

(* keep *)
always @(posedge clk) begin
    nq[0] <= nz[QB-1:0];
    for (i = 0; i < QB; i = i + 1) begin
        nq[i+1] <= {nq[i][QB-2:0], ~sum[i][DW+1]};
    end
end

// r + d computed from the registers alone and chosen by r's sign after the carry chain (carry
// select), not r + (d masked by the sign): the sign's net (one load per bit) then sits after
// the addition, not in front of it (make timing: the masked form was the top's worst path,
// 6.14 ns calibrated: the 43-load sign, two LUTs, 11 CARRY4 and the caller's LUT; docs/timing.md)
/* verilator lint_off UNUSEDSIGNAL */
wire [DW:0] r_add  = rem[QB] + {1'b0, den[QB]};
wire [DW:0] r_true = rem[QB][DW] ? r_add : rem[QB];
/* verilator lint_on UNUSEDSIGNAL */
// out_rza, out_rzr: each piece's test made on r + d and on r, each a kept net of its own (one
// LUT of the carry chain's outputs or of registers); the caller registers them and makes the
// choice by out_rneg after its register (make timing: ABC built a piece's test of the chosen
// r_true as three LUT levels after the carry chain, 5.66 ns calibrated; with the choice after
// the kept tests, a LUT6 and the choice, 5.69 ns)
localparam NZ = (DW + ZP - 1) / ZP;
/* verilator lint_off UNUSEDSIGNAL */
wire [NZ*ZP+DW-1:0] ra_w = {{(NZ*ZP){1'b0}}, r_add[DW-1:0]};
wire [NZ*ZP+DW-1:0] rr_w = {{(NZ*ZP){1'b0}}, rem[QB][DW-1:0]};
/* verilator lint_on UNUSEDSIGNAL */
(* keep *) wire [NZ-1:0] nz_a;     // piece i of r + d is nonzero
(* keep *) wire [NZ-1:0] nz_r;     // piece i of r is nonzero
genvar z;
generate
for (z = 0; z < NZ; z = z + 1) begin : g_nz
    assign nz_a[z] = |ra_w[ZP*z +: ZP];
    assign nz_r[z] = |rr_w[ZP*z +: ZP];
end
endgenerate
assign out_rza   = nz_a;
assign out_rzr   = nz_r;
assign out_rneg  = rem[QB][DW];
assign out_valid = v[QB];
assign out_q     = nq[QB];
assign out_side  = sd[QB];
assign out_r     = r_true[DW-1:0];

endmodule

`resetall
