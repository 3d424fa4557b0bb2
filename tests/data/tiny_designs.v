// Tiny designs with known resources and logic depth, for tests/test_report_yosys.py.
// tests/data/make_yosys_samples.py synthesises report_sample into the saved yosys outputs.

// 8-bit registered adder: 16 input FFs + 9 output FFs, LUT2s feeding 3 CARRY4.
module add8_reg(input clk, input [7:0] a, input [7:0] b, output reg [8:0] s);
  reg [7:0] ra, rb;
  always @(posedge clk) begin ra <= a; rb <= b; s <= ra + rb; end
endmodule

// 16x16 signed multiply forced onto one DSP48E1 (its A/B/P registers absorb the FFs).
module mul16_dsp(input clk, input signed [15:0] a, input signed [15:0] b,
                 output reg signed [31:0] p);
  reg signed [15:0] ra, rb;
  (* use_dsp = "yes" *) wire signed [31:0] m = ra * rb;
  always @(posedge clk) begin ra <= a; rb <= b; p <= m; end
endmodule

// Exactly three LUT levels between registers: three chained LUT6 primitives.
module lut_chain3(input clk, input [5:0] d, output reg q);
  reg [5:0] r;
  wire a, b, c;
  (* keep *) LUT6 #(.INIT(64'h6996966996696996)) l1
    (.O(a), .I0(r[0]), .I1(r[1]), .I2(r[2]), .I3(r[3]), .I4(r[4]), .I5(r[5]));
  (* keep *) LUT6 #(.INIT(64'h6996966996696996)) l2
    (.O(b), .I0(a), .I1(r[1]), .I2(r[2]), .I3(r[3]), .I4(r[4]), .I5(r[5]));
  (* keep *) LUT6 #(.INIT(64'h6996966996696996)) l3
    (.O(c), .I0(b), .I1(r[1]), .I2(r[2]), .I3(r[3]), .I4(r[4]), .I5(r[0]));
  always @(posedge clk) begin r <= d; q <= c; end
endmodule

// Memories: a 1024x32 synchronous RAM (one RAMB36E1), a 32x8 distributed RAM with an
// asynchronous read (two RAM32M) and a 16-deep 8-bit delay line (eight SRL16E).
module mem_mix(input clk, input we, input [9:0] wa, input [9:0] ra, input [31:0] wd,
               output reg [31:0] rd, input [4:0] la, input [7:0] ld, output [7:0] lq,
               input [7:0] sd, output [7:0] sq);
  reg [31:0] bram [0:1023];
  always @(posedge clk) begin if (we) bram[wa] <= wd; rd <= bram[ra]; end
  reg [7:0] lram [0:31];
  always @(posedge clk) if (we) lram[la] <= ld;
  assign lq = lram[ra[4:0]];
  reg [7:0] sh [0:15];
  integer i;
  always @(posedge clk) begin
    sh[0] <= sd;
    for (i = 1; i < 16; i = i + 1) sh[i] <= sh[i-1];
  end
  assign sq = sh[15];
endmodule

// Everything above in one flattened design: the source of the saved yosys samples.
module report_sample(input clk, input [63:0] x, output [63:0] y, output [31:0] p,
                     output q, output [31:0] rd, output [7:0] lq, output [7:0] sq);
  add8_reg  u_add (.clk(clk), .a(x[7:0]), .b(x[15:8]), .s(y[8:0]));
  mul16_dsp u_mul (.clk(clk), .a(x[31:16]), .b(x[47:32]), .p(p));
  lut_chain3 u_lut (.clk(clk), .d(x[53:48]), .q(q));
  mem_mix   u_mem (.clk(clk), .we(x[54]), .wa(x[63:54]), .ra(x[9:0]), .wd(x[47:16]),
                   .rd(rd), .la(x[4:0]), .ld(x[15:8]), .lq(lq), .sd(x[23:16]), .sq(sq));
  assign y[63:9] = 55'd0;
endmodule

// Parameterised registered adder: W/4 CARRY4 in one chain (W = 32: 8 CARRY4).
module addw_reg #(parameter W = 8) (input clk, input [W-1:0] a, input [W-1:0] b,
                                    output reg [W-1:0] s);
  reg [W-1:0] ra, rb;
  always @(posedge clk) begin ra <= a; rb <= b; s <= ra + rb; end
endmodule
