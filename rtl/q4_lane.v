// 4-bit lane: llama.cpp Q4_1 rows (w = d*q + m per 32-weight block), one beat per clock.
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
//
// Row layout (8-byte beats, built once by the host: generators.q4.pack_q4_rows): per 64
// weights one scale beat {m1, d1, m0, d0} (fp16, d0 in bytes 0-1) ahead of four code beats;
// code beat c of a group holds weights 16c .. 16c+15 of it, weight 16c+j in bits [4j+3:4j]
// (unsigned 4-bit codes). Blocks: code beats 0-1 are block 0 (d0, m0), beats 2-3 block 1.
// The stream controller (GROUP = 4) marks a scale beat with an all-zero byte mask (in_bzero,
// registered by the controller) and reads 16 x elements (two banks) per code beat; x past K is
// zero.
//
// Numerics (docs/q4.md): per block the exact integers S = sum q*x and X = sum x; the block's
// d and m converted exactly (fp16 = sig * 2^(sh-24), sig 11 bits signed by the sign bit,
// sh 0..29); d*S*2^(sh_d+24) + m*X*2^(sh_m+24) summed exactly in an ACC_W-bit integer in units
// of 2^-48; the row's sum rounded once, to nearest even, to float32 (every sum is a float32
// normal or zero: |value| < 2^(ACC_W-49), the smallest nonzero 2^-48). An fp16 d or m with
// exponent 31 (Inf, NaN) in a block holding a weight of index < K counts as zero and raises
// `bad`.
// Format 0x05 (in_xb: Q8_1 x blocks, docs/activations.md section 3): with a row's scale beat
// comes the x scale table's word of the same group, in_xs per vector {s1, d1, s0, d0} (fp16);
// per block P = sig_dw*sig_dx (a third DSP48 per vector, while the block's code beats pass A0..C),
// A = P*S on the multiply of d*S and B = sig_mw*sig_sx on the multiply of m*X; A*2^(sh_dw+sh_dx)
// + B*2^(sh_mw+sh_sx) summed in the same accumulator (units of 2^-48: the same rounding, the
// same word). X is not used. An Inf/NaN d or s of x counts as zero and raises `bad` as d and m
// do.
// Format 0x09 (Q8_0 = 1 and in_x9: Q8_0 rows with Q8_0 x blocks on the INT8 lane's products,
// docs/activations.md section 3): a scale beat {d3, d2, d1, d0} (fp16) ahead of up to 16 code
// beats of 8 INT8 weights, block j of the group in code beats 4j .. 4j+3, with the x scale
// table's word {dx3, dx2, dx1, dx0}. The INT8 lane multiplies the code beat's weights by x and
// sums them (in_s8: the beat's sum s, exact, at stage D); here P = sig_dw*sig_dx of the beat's
// block (the third DSP48, as 0x05's), and the beat's term P*s in two parts on the two
// multiplies, s = 32*hi + lo (hi = s >>> 5, lo = s[4:0] >= 0): P*hi shifted by
// sh_dw + sh_dx + 5 on the multiply of d*S, P*lo shifted by sh_dw + sh_dx on the multiply of
// m*X (the shifts stay within 0..63), both into the same accumulator: every code beat is a
// term, their exact sum is sum_b d_w*d_x*S_b, rounded once as 0x04's and 0x05's. An Inf/NaN d
// of the row or of x counts as zero and raises `bad` on the block's last code beat (a block
// cut short by tlast raises nothing, as 0x05's).
//
// Out: psum carries the row's float32 bits in the slot of the row's last beat and zero in
// every other slot (the shared back end's accumulator then holds the word), LANE_LAT = 21
// cycles after the lane's inputs (generators/designs/q4.py LANE_STAGES):
//   A0 scale beat held; code beat: per weight the two pair products q0 x + 2 q1 x and
//      q2 x + 2 q3 x (one shift-add level each), x registered; the block's d, m (and d_x, s_x)
//   A  16 products q*x (one adder level); d, m, d_x, s_x decoded from fp16
//   B  sums of four; P = sig_dw*sig_dx (DSP48, M register)
//   C  beat sums S_beat, X_beat; P in the P register
//   D  block sums; the multiplies' operands chosen by the format, the exponent sums
//   E1 d*S (or P*S) and m*X (or m*s_x) (2 DSP48, M register)
//   E2 the products in the P register   F1 shifted by the exponents' low two bits
//   F2 shifted by bits 3:2 (by 4s)      F3 shifted by bits 5:4 (by 16s)
//   G  the two terms added              H  row accumulator, low half (ACC_W/2 bits)
//   H2 its high half, with the low half's carry
//   R1 sign, magnitude (the sign in a copy per 32 bits)
//   R2 per 16-bit chunk: nonzero, its top bit
//   R3a the leading chunk of each half  R3 leading-one position and the normalising shift
//   R4a, R4b normalised (two stages)    R5 mantissa, guard and sticky bits, both exponents
//   R6 rounded, packed
// Vectors (VECTORS > 1, docs/vectors.md): the scale beat, the fp16 decode and every control
// bit are shared; each vector has its own products, sums, x scales, three DSP48 multiplies,
// accumulator and
// float32 rounding (generate block g_vec[v]), x of vector v in in_x[128*v +: 128], its word in
// psum[32*v +: 32]. One finisher per vector: a row may end every beat (K <= 16 is one code beat
// after its scale beat), so a shared finisher would have to stall the stream.
// Timing (docs/timing.md): every stage is at most one adder level after a LUT level, two
// adder levels of registered operands, or one 4- or 8-way shift step; the
// products leave their DSP48s from the P register; the control bits that drive a whole word
// (first, valid) are flip-flops of their own, never the end of a shift-register LUT.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module q4_lane #
(
    // Row accumulator width in units of 2^-48 (from the generator: the exact worst case of
    // max_k over both formats; 103 bits at max_k = 2048)
    parameter ACC_W = 103,
    // Activation vectors computed per beat
    parameter VECTORS = 1,
    // Format 0x09 on this lane's multiplies and finisher (1: in_x9 and in_s8 are used; 0: they
    // are ignored and the lane is the 0x04 / 0x05 lane alone)
    parameter Q8_0 = 0,
    // Bits of an INT8 beat's sum (in_s8, per vector): 8 products of int8 x int8, 19 bits
    parameter S8W = 19
)
(
    input  wire                 aclk,
    input  wire                 in_valid,
    input  wire                 in_first,
    input  wire                 in_last,
    input  wire [63:0]          in_w,
    input  wire [128*VECTORS-1:0] in_x,
    // the beat's byte mask is all zero (a scale beat when in_valid): a register of the
    // controller's (lane_bzero), not a compare of lane_bmask here, whose result drives every
    // scale register's enable (make timing: lane_bmask -> newrow through the compare and that
    // 195-load net, 5.97 ns calibrated)
    input  wire                 in_bzero,
    // the beat is of a format 0x05 frame (x in Q8_1 blocks)
    input  wire                 in_xb,
    // with a 0x05 / 0x09 scale beat: the x scale table's word of its group, vector v in
    // [64*v +: 64]
    input  wire [64*VECTORS-1:0] in_xs,
    /* verilator lint_off UNUSEDSIGNAL */
    // the beat is of a format 0x09 frame (Q8_0 rows, Q8_0 x; in_xb is set too; unused when
    // Q8_0 = 0)
    input  wire                 in_x9,
    // the INT8 lane's sum of the code beat's 8 products, vector v in [S8W*v +: S8W], at stage
    // D (5 cycles after the beat's in_* inputs; unused when Q8_0 = 0)
    input  wire [S8W*VECTORS-1:0] in_s8,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [32*VECTORS-1:0] psum,
    output wire [VECTORS-1:0]   ci,
    output wire                 bad
);

localparam PW = ACC_W;              // width of the row sum
localparam LZW = 7;                 // bits of a position in it
localparam GW = 99;                 // the block's term: |A| + |B| < 2^98 (0x05; 0x04 < 2^81;
                                    // a 0x09 beat's < 2^97)

initial begin
    if (ACC_W < GW || ACC_W > 127) begin
        $display("q4_lane: ACC_W=%0d out of range %0d..127", ACC_W, GW);
        $finish;
    end
    if (VECTORS < 1 || VECTORS > 255) begin
        $display("q4_lane: VECTORS=%0d out of range 1..255", VECTORS);
        $finish;
    end
    if (Q8_0 != 0 && Q8_0 != 1) begin
        $display("q4_lane: Q8_0=%0d must be 0 or 1", Q8_0);
        $finish;
    end
    if (S8W < 6 || S8W > 22) begin
        $display("q4_lane: S8W=%0d out of range 6..22 (s >>> 5 must fit the 17-bit operand)", S8W);
        $finish;
    end
end

// ---------------------------------------------------------------- stage 1 bookkeeping
wire        in_scale = in_valid && in_bzero;
wire        in_code  = in_valid && !in_bzero;
reg  [63:0] scale_r;                // the current group's {m1, d1, m0, d0} (0x09: {d3 .. d0})
reg         xb_r;                   // the row is of a 0x05 or 0x09 frame
/* verilator lint_off UNUSEDSIGNAL */
reg         x9_q;                   // the row is of a 0x09 frame (unused when Q8_0 = 0)
/* verilator lint_on UNUSEDSIGNAL */
wire        x9_r = (Q8_0 != 0) && x9_q;
reg  [3:0]  cidx;                   // code beat index in its group (0x04, 0x05: bits 1:0)
reg         newrow;                 // the next term starts a row: the row sum resets

always @(posedge aclk) begin
    if (in_scale) begin
        scale_r <= in_w;
        xb_r    <= in_xb;
        x9_q    <= in_x9;
        cidx    <= 4'd0;
        if (in_first) newrow <= 1'b1;
    end else if (in_code) begin
        cidx <= cidx + 4'd1;
        // 0x04, 0x05: a block (two code beats) is the row's first term; 0x09: a code beat
        if (cidx[0] || in_last || x9_r) newrow <= 1'b0;
    end
end
// 0x09: the row's d of the code beat's block (block cidx[3:2] of the group)
wire [15:0] d9_sel = scale_r[16*cidx[3:2] +: 16];

// ---------------------------------------------------------------- shared: control, scales
// every stage's control bits and the group's scales, once for all vectors
reg               a0_valid, a0_end, a0_bend, a0_second, a0_first, a0_last, a0_xb, a0_x9;
reg  [31:0]       a0_dm;
// fp16 h -> signed significand (12 bits) and shift: value = sig * 2^(sh - 24)
function [17:0] f16dec(input [15:0] h);   // {bad, sh[4:0], sig[11:0]}
    reg [4:0]  e;
    reg [11:0] mag;
    begin
        e   = h[14:10];
        mag = {1'b0, (e != 5'd0), h[9:0]};
        if (e == 5'd31) begin
            f16dec = {1'b1, 5'd0, 12'd0};
        end else begin
            f16dec = {1'b0, (e == 5'd0) ? 5'd0 : e - 5'd1, h[15] ? -mag : mag};
        end
    end
endfunction

// a0_end: the beat carries a term (0x04, 0x05: a block's last code beat; 0x09: every code
// beat); a0_bend: the block's last code beat (its scales' Inf/NaN flag counts)
always @(posedge aclk) begin
    a0_valid  <= in_code;
    a0_end    <= cidx[0] || in_last || x9_r;
    a0_bend   <= x9_r ? ((cidx[1:0] == 2'd3) || in_last) : (cidx[0] || in_last);
    a0_second <= cidx[0];
    a0_first  <= newrow;
    a0_last   <= in_last;
    a0_xb     <= xb_r;
    a0_x9     <= x9_r;
    // 0x09: the block's d in both halves (decoded as d and as m: the m multiply's exponent sum
    // is then sh_dw + sh_dx, and an Inf/NaN d is seen by both)
    a0_dm     <= x9_r ? {d9_sel, d9_sel} : cidx[1] ? scale_r[63:32] : scale_r[31:0];
end

// A: the block's d and m decoded (every beat; the block's end beat carries them on)
reg               a_valid, a_end, a_bend, a_second, a_first, a_last, a_xb, a_x9;
reg  [17:0]       a_d, a_m;
always @(posedge aclk) begin
    a_valid <= a0_valid; a_end <= a0_end; a_bend <= a0_bend; a_second <= a0_second;
    a_first <= a0_first; a_last <= a0_last; a_xb <= a0_xb; a_x9 <= a0_x9;
    a_d <= f16dec(a0_dm[15:0]);
    a_m <= f16dec(a0_dm[31:16]);
end

reg               b_valid, b_end, b_bend, b_first, b_last, b_xb, b_x9;
reg  [17:0]       b_d, b_m;
always @(posedge aclk) begin
    b_valid <= a_valid; b_end <= a_end; b_bend <= a_bend; b_first <= a_first;
    b_last <= a_last; b_xb <= a_xb; b_x9 <= a_x9; b_d <= a_d; b_m <= a_m;
end
// b_second selects add_s and add_x (D): a flip-flop of its own, not the end of a shift-register
// LUT (make timing: its SRL's 1.47 ns clock-to-out started the top's worst path, 6.02 ns)
(* shreg_extract = "no" *) reg b_second;
(* keep *)
always @(posedge aclk) begin
    b_second <= a_second;
end

reg               c_valid, c_end, c_bend, c_first, c_last, c_xb;
/* verilator lint_off UNUSEDSIGNAL */
reg               c_x9;             // unused when Q8_0 = 0
/* verilator lint_on UNUSEDSIGNAL */
reg  [17:0]       c_d, c_m;
always @(posedge aclk) begin
    c_valid <= b_valid; c_end <= b_end; c_bend <= b_bend; c_first <= b_first;
    c_last <= b_last; c_xb <= b_xb; c_x9 <= b_x9; c_d <= b_d; c_m <= b_m;
end


reg               d_valid, d_bend, d_first, d_last, d_bad;
/* verilator lint_off UNUSEDSIGNAL */
reg  [11:0]       d_sigm;           // the row's m (shared by every vector's m*X, m*s_x; unused
                                    // with Q8_0: each vector's d_opm)
/* verilator lint_on UNUSEDSIGNAL */
// a vector's x scale of this block is Inf/NaN (0x05, 0x09)
wire [VECTORS-1:0] d_xbad;
always @(posedge aclk) begin
    d_valid <= c_valid && c_end;
    d_bend  <= c_valid && c_bend;
    d_first <= c_first;
    d_last  <= c_last;
    d_bad   <= c_d[17] || c_m[17];
    d_sigm  <= c_m[11:0];
end
/* verilator lint_off UNUSEDSIGNAL */
wire signed [11:0] sig_m = d_sigm;
/* verilator lint_on UNUSEDSIGNAL */

// E1, E2: the control bits wait out the two multiplies' registers in one 2-deep delay line of
// the bundle {valid, first, last, bad}
localparam EW = 4;                  // bits of the bundle: four flags
reg  [EW-1:0]     e1_ctl, e_ctl;
always @(posedge aclk) begin
    e1_ctl <= {d_valid, d_first, d_last, d_bend && (d_bad || (|d_xbad))};
    e_ctl  <= e1_ctl;
end
wire              e_valid, e_first, e_last, e_bad;
assign {e_valid, e_first, e_last, e_bad} = e_ctl;

reg               f1_valid, f1_first, f1_last, f1_bad;
always @(posedge aclk) begin
    f1_valid <= e_valid; f1_first <= e_first; f1_last <= e_last; f1_bad <= e_bad;
end

reg               f2_valid, f2_first, f2_last, f2_bad;
always @(posedge aclk) begin
    f2_valid <= f1_valid; f2_first <= f1_first; f2_last <= f1_last; f2_bad <= f1_bad;
end

reg               f_valid, f_first, f_last, f_bad;
always @(posedge aclk) begin
    f_valid <= f2_valid; f_first <= f2_first; f_last <= f2_last; f_bad <= f2_bad;
end

reg               g_last, g_bad;
always @(posedge aclk) begin
    g_last <= f_last; g_bad <= f_bad;
end

reg               h_row, h_bad;
reg               h2_row, h2_bad;
reg               r1_row, r1_bad;
reg               r2_row, r2_bad;
reg               r3a_row, r3a_bad;
reg               r3_row, r3_bad;
reg               r4a_row, r4a_bad;
reg               r4_row, r4_bad;
reg               r5_row, r5_bad;
reg               r6_bad;
// g_valid of vector 0 (every vector's copy is the same flip-flop's twin)
wire              g_valid0;
always @(posedge aclk) begin
    h_row <= g_valid0 && g_last;
    h_bad <= g_bad;
    h2_row <= h_row; h2_bad <= h_bad;
    r1_row <= h2_row; r1_bad <= h2_bad;
    r2_row <= r1_row; r2_bad <= r1_bad;
    r3a_row <= r2_row; r3a_bad <= r2_bad;
    r3_row <= r3a_row; r3_bad <= r3a_bad;
    r4a_row <= r3_row; r4a_bad <= r3_bad;
    r4_row <= r4a_row; r4_bad <= r4a_bad;
    r5_row <= r4_row; r5_bad <= r4_bad;
    r6_bad <= r5_bad;
end

// q*x for a 4-bit unsigned q as shift-add (kept out of the DSP48s), in two adder levels:
// (q0 x + 2 q1 x) + 4 (q2 x + 2 q3 x); the two pair products are registered (A0) before the
// last addition (A), so neither stage has more than one adder behind its select LUTs
function [9:0] qpair(input [1:0] q, input [7:0] x);   // q0 x + 2 q1 x, 10 bits signed
    reg [9:0] xe;
    begin
        xe = {{2{x[7]}}, x};
        qpair = (q[0] ? xe : 10'd0) + (q[1] ? {xe[8:0], 1'b0} : 10'd0);
    end
endfunction

localparam NCH = (PW + 15) / 16;    // 16-bit chunks of the row sum (R2)
localparam NLO = (NCH + 1) / 2;     // chunks of the low half (R3a): 0 .. NLO-1
localparam [LZW-1:0] TOP = PW - 1;
localparam PDW = 41;                // d*S (12 x 17 bits) or P*S (24 x 17 bits), signed
// m*X or m*s_x (12 x 13 bits), signed; with 0x09 also P*lo (|P| < 2^22, 0 <= lo < 32)
localparam PMW = (Q8_0 != 0) ? 28 : 25;

// ---------------------------------------------------------------- per vector: the datapath
genvar gv, gi;
generate
for (gv = 0; gv < VECTORS; gv = gv + 1) begin : g_vec
    wire [127:0] vx = in_x[128*gv +: 128];

    // ------------------------------------------------------------ x scales (0x05)
    // the group's x scales come with its scale beat; A0 takes the block's d_x, s_x, A decodes
    // them, B and C form P = sig_dw*sig_dx in a DSP48 (M and P registers)
    reg  [63:0]       xs_r;             // {s1, d1, s0, d0} of the current group
    // the row is 0x05: its x is not summed (X is not used), a copy of xb_r per vector
    (* shreg_extract = "no" *) reg xb_v;
    reg  [31:0]       a0_xds;           // the block's {s, d} (0x09: {d, d})
    reg  [17:0]       a_dx, a_sx, b_sx;
    reg  [5:0]        b_dx;             // d_x's {bad, sh}: its significand is in P
    reg  [6:0]        c_dx;             // d_x's {bad, sh + 5 (0x09) or sh}
    reg  [5:0]        c_sx;             // s_x's {bad, sh}: its significand goes by hold_x
    always @(posedge aclk) begin
        if (in_scale) begin
            xs_r <= in_xs[64*gv +: 64];
            xb_v <= in_xb;
        end
        a0_xds <= x9_r ? {2{xs_r[16*cidx[3:2] +: 16]}} : cidx[1] ? xs_r[63:32] : xs_r[31:0];
        a_dx <= f16dec(a0_xds[15:0]);
        a_sx <= f16dec(a0_xds[31:16]);
        b_dx <= a_dx[17:12]; b_sx <= a_sx;
        // 0x09: the P*hi term's exponent sum is 5 more (hi = s >>> 5)
        c_dx <= {b_dx[5], {1'b0, b_dx[4:0]} + ((Q8_0 != 0 && b_x9) ? 6'd5 : 6'd0)};
        c_sx <= b_sx[17:12];
    end
    wire signed [11:0] a_sigd  = a_d[11:0];
    wire signed [11:0] a_sigdx = a_dx[11:0];
    (* use_dsp = "yes" *) reg signed [23:0] b_pp;
    (* use_dsp = "yes" *) reg signed [23:0] c_pp;
    always @(posedge aclk) begin
        b_pp <= a_sigd * a_sigdx;
        c_pp <= b_pp;
    end

    // ------------------------------------------------------------ A0, A: products
    // flat vectors; each field kept at the width of the sum it feeds (sign-extended)
    reg  [16*10-1:0]  a0_plo;           // q0 x + 2 q1 x, 16 fields
    reg  [16*10-1:0]  a0_phi;           // q2 x + 2 q3 x, 16 fields
    reg  [16*8-1:0]   a0_x;             // x, 16 fields
    reg  [16*14-1:0]  a_p;              // q*x, 16 fields
    reg  [16*10-1:0]  a_x;              // x, 16 fields
    for (gi = 0; gi < 16; gi = gi + 1) begin : g_prod
        always @(posedge aclk) begin
            a0_plo[10*gi +: 10] <= qpair(in_w[4*gi +: 2], vx[8*gi +: 8]);
            a0_phi[10*gi +: 10] <= qpair(in_w[4*gi + 2 +: 2], vx[8*gi +: 8]);
            a0_x[8*gi +: 8]     <= xb_v ? 8'd0 : vx[8*gi +: 8];
        end
        wire [9:0]  plo = a0_plo[10*gi +: 10];
        wire [9:0]  phi = a0_phi[10*gi +: 10];
        wire [11:0] p = {{2{plo[9]}}, plo} + {phi, 2'b00};
        always @(posedge aclk) begin
            a_p[14*gi +: 14] <= {{2{p[11]}}, p};
            a_x[10*gi +: 10] <= {{2{a0_x[8*gi+7]}}, a0_x[8*gi +: 8]};
        end
    end

    // ------------------------------------------------------------ B, C: beat sums
    reg  [4*16-1:0]   b_p;              // sums of four products, 4 fields
    reg  [4*12-1:0]   b_x;              // sums of four x, 4 fields
    for (gi = 0; gi < 4; gi = gi + 1) begin : g_four
        wire [13:0] sp = a_p[14*(4*gi) +: 14] + a_p[14*(4*gi+1) +: 14]
                       + a_p[14*(4*gi+2) +: 14] + a_p[14*(4*gi+3) +: 14];
        wire [9:0]  sx = a_x[10*(4*gi) +: 10] + a_x[10*(4*gi+1) +: 10]
                       + a_x[10*(4*gi+2) +: 10] + a_x[10*(4*gi+3) +: 10];
        always @(posedge aclk) begin
            b_p[16*gi +: 16] <= {{2{sp[13]}}, sp};
            b_x[12*gi +: 12] <= {{2{sx[9]}}, sx};
        end
    end

    (* shreg_extract = "no" *) reg c_second;   // a flip-flop, not an SRL's end
    (* keep *)
    always @(posedge aclk) begin
        c_second <= b_second;
    end
    reg  signed [15:0] c_s;
    reg  signed [11:0] c_x;             // the beat's sum of x (0 for 0x05: zeroed at A0)
    always @(posedge aclk) begin
        c_s <= b_p[15:0] + b_p[31:16] + b_p[47:32] + b_p[63:48];
        c_x <= b_x[11:0] + b_x[23:12] + b_x[35:24] + b_x[47:36];
    end

    // ------------------------------------------------------------ D: block sums
    // d_s = add_s + c_s and d_x = add_x + c_x, the adders' operands flip-flops (the DSP48s'
    // inputs one carry chain after them; make timing: with a select by c_second in front,
    // c_second -> the DSP48 at 6.06 ns calibrated): add_s holds a block's first beat's sum for
    // its second beat and is cleared by a first beat entering C; 0x05: add_x takes sig_sx from
    // B every beat (a block's beats share it) and c_x is 0, so d_x = sig_sx.
    reg  signed [15:0] add_s;
    reg  signed [11:0] add_x;
    reg  signed [16:0] d_s;
    // d_x is kept a fabric flip-flop: otherwise yosys packs it as the m multiply's pre-adder
    // (ADREG, add_x into AREG, c_x into DREG), which puts add_x's select (b_second, 58 loads)
    // and c_x's four-operand adder in front of DSP48 pins (make timing: 6.02 ns, and c_x's
    // sign net on the DSP's D pins, 6.09 ns calibrated)
    (* keep *) reg signed [12:0] d_x;   // X (0x04) or sig_sx (0x05)
    always @(posedge aclk) begin
        if (b_valid && !b_second) begin
            add_s <= 16'sd0;
        end else if (c_valid && !c_second) begin
            add_s <= c_s;
        end
        if (b_xb) begin
            add_x <= b_sx[11:0];
        end else if (b_valid && !b_second) begin
            add_x <= 12'sd0;
        end else if (c_valid && !c_second && !c_xb) begin
            add_x <= c_x;
        end
        d_s <= {add_s[15], add_s} + {c_s[15], c_s};
        d_x <= {add_x[11], add_x} + {c_x[11], c_x};
    end
    // the multiplier of S, P (0x05, 0x09) or sig_d (0x04), and the two terms' shifts in units
    // of 2^-48: sh_dw + sh_dx and sh_mw + sh_sx (0..58), or sh_d + 24 and sh_m + 24 (24..53);
    // 0x09: sh_dw + sh_dx + 5 (P*hi) and sh_dw + sh_dx (P*lo), 0..63
    reg  signed [23:0] d_opa;
    reg  [5:0]        d_sha, d_shb;
    reg               d_xbad_r;
    always @(posedge aclk) begin
        d_opa    <= c_xb ? c_pp : {{12{c_d[11]}}, c_d[11:0]};
        d_sha    <= {1'b0, c_d[16:12]} + (c_xb ? c_dx[5:0] : 6'd24);
        d_shb    <= {1'b0, c_m[16:12]} + (c_xb ? {1'b0, c_sx[4:0]} : 6'd24);
        d_xbad_r <= c_xb && (c_dx[6] || c_sx[5]);
    end
    assign d_xbad[gv] = d_xbad_r;

    // ------------------------------------------------------------ E1, E2: the two multiplies
    // the product registered twice: in the DSP48's M register (E1) and its P register (E2), so
    // the F shift starts 0.43 ns after the clock, not 2.3 ns (docs/timing.md)
    // 0x09: the operands are P (both) and the INT8 lane's beat sum s = 32*hi + lo, chosen in
    // front of the DSP48s' ports from flip-flops (d_x9: this vector's copy of the format flag)
    (* use_dsp = "yes" *) reg signed [PDW-1:0] e1_pd;
    (* use_dsp = "yes" *) reg signed [PMW-1:0] e1_pm;
    if (Q8_0 != 0) begin : g_q80
        wire [S8W-1:0] s8 = in_s8[S8W*gv +: S8W];
        (* shreg_extract = "no" *) reg d_x9;
        reg signed [23:0] d_opm;        // sig_m, or P (0x09)
        (* keep *)
        always @(posedge aclk) begin
            d_x9 <= c_x9;
        end
        always @(posedge aclk) begin
            d_opm <= c_x9 ? c_pp : {{12{c_m[11]}}, c_m[11:0]};
        end
        wire signed [16:0] s_hi = {{(22-S8W){s8[S8W-1]}}, s8[S8W-1:5]};
        wire signed [12:0] s_lo = {8'd0, s8[4:0]};
        wire signed [16:0] op_s = d_x9 ? s_hi : d_s;    // d*S's multiplicand: S, or hi
        wire signed [12:0] op_x = d_x9 ? s_lo : d_x;    // m*X's: X or sig_sx, or lo
        always @(posedge aclk) begin
            e1_pd <= d_opa * op_s;
            e1_pm <= d_opm * op_x;
        end
    end else begin : g_q4
        always @(posedge aclk) begin
            e1_pd <= d_opa * d_s;
            e1_pm <= sig_m * d_x;
        end
    end
    reg  [5:0]        e1_sha, e1_shb;
    always @(posedge aclk) begin
        e1_sha   <= d_sha;
        e1_shb   <= d_shb;
    end
    (* use_dsp = "yes" *) reg signed [PDW-1:0] e_pd;
    (* use_dsp = "yes" *) reg signed [PMW-1:0] e_pm;
    reg  [5:0]        e_sha, e_shb;
    always @(posedge aclk) begin
        e_pd    <= e1_pd;
        e_pm    <= e1_pm;
        e_sha   <= e1_sha;
        e_shb   <= e1_shb;
    end

    // ------------------------------------------------------------ F1, F2, F3, G: shifted, added
    // the shift by 0..63 in three 4-way steps (one LUT level each): by the exponent sum's bits
    // 1:0, then 3:2 (by 4s), then 5:4 (by 16s); every term fits GW bits (|A| < 2^97)
    reg  signed [PDW+2:0]  f1_td;
    reg  signed [PMW+2:0]  f1_tm;
    reg  [3:0]        f1_sha, f1_shb;
    always @(posedge aclk) begin
        f1_td  <= {{3{e_pd[PDW-1]}}, e_pd} <<< e_sha[1:0];
        f1_tm  <= {{3{e_pm[PMW-1]}}, e_pm} <<< e_shb[1:0];
        f1_sha <= e_sha[5:2];
        f1_shb <= e_shb[5:2];
    end
    reg  signed [PDW+14:0] f2_td;
    reg  signed [PMW+14:0] f2_tm;
    reg  [1:0]        f2_sha, f2_shb;
    always @(posedge aclk) begin
        f2_td  <= {{12{f1_td[PDW+2]}}, f1_td} <<< {f1_sha[1:0], 2'b00};
        f2_tm  <= {{12{f1_tm[PMW+2]}}, f1_tm} <<< {f1_shb[1:0], 2'b00};
        f2_sha <= f1_sha[3:2];
        f2_shb <= f1_shb[3:2];
    end
    reg  signed [GW-1:0] f_td;
    reg  signed [GW-1:0] f_tm;
    always @(posedge aclk) begin
        f_td <= {{(GW-PDW-15){f2_td[PDW+14]}}, f2_td} <<< {f2_sha, 4'b0000};
        f_tm <= {{(GW-PMW-15){f2_tm[PMW+14]}}, f2_tm} <<< {f2_shb, 4'b0000};
    end

    // g_valid drives the whole accumulator: a flip-flop of its own, not the end of a
    // shift-register LUT (`keep` for yosys, `shreg_extract` for Vivado)
    (* shreg_extract = "no" *) reg g_valid;
    reg  signed [GW-1:0] g_t;
    (* keep *)
    always @(posedge aclk) begin
        g_valid    <= f_valid;
    end
    always @(posedge aclk) begin
        g_t <= f_td + f_tm;
    end
    if (gv == 0) begin : g_v0
        assign g_valid0 = g_valid;
    end

    // ------------------------------------------------------------ H: row accumulator
    // acc is what G's term is added to: the row's sum so far, cleared a cycle ahead of the
    // row's first block (f_first: `first` is high from a row's scale beat through its first
    // block's end beat, the block's one valid term, and low after it), so the adder's operands
    // are flip-flops and its sum goes to them without a select (a synchronous reset and an
    // enable); docs/timing.md
    // In two halves (make timing: the whole ACC_W-bit carry chain, 26 CARRY4 at 103 bits, was
    // 6.2 ns): H adds the low LW bits and registers their carry and the term's high half; H2
    // adds those to the high half a cycle later, its clear and enable a cycle later too.
    localparam LW = PW / 2;             // bits of the low half
    localparam UW = PW - LW;            // bits of the high half
    wire [PW-1:0]     g_te = {{(PW-GW){g_t[GW-1]}}, g_t};
    reg  [LW-1:0]     acc_lo;
    wire [LW:0]       lo_next = {1'b0, acc_lo} + {1'b0, g_te[LW-1:0]};
    reg  [LW-1:0]     h_lo;             // the low half of the sum so far
    reg               h_cy;             // its carry into the high half
    reg  [UW-1:0]     h_t;              // the term's high half
    always @(posedge aclk) begin
        if (f_first)      acc_lo <= {LW{1'b0}};
        else if (g_valid) acc_lo <= lo_next[LW-1:0];
        h_lo <= lo_next[LW-1:0];
        h_cy <= lo_next[LW];
        h_t  <= g_te[PW-1:LW];
    end
    // the high half's clear and enable: flip-flops of their own (they drive UW bits)
    (* shreg_extract = "no" *) reg h_first, h_valid;
    (* keep *)
    always @(posedge aclk) begin
        h_first <= f_first;
        h_valid <= g_valid;
    end
    reg  [UW-1:0]     acc_hi;
    wire [UW-1:0]     hi_next = acc_hi + h_t + {{(UW-1){1'b0}}, h_cy};
    reg  [PW-1:0]     h_sum;            // H2: the row's sum, when h2_row
    reg               h_lz;             // its low half is zero (R1: the negation's carry)
    always @(posedge aclk) begin
        if (h_first)      acc_hi <= {UW{1'b0}};
        else if (h_valid) acc_hi <= hi_next;
        h_sum <= {hi_next, h_lo};
        h_lz  <= (h_lo == {LW{1'b0}});
    end
    // the sum's sign, once per 32 bits of R1's negation (a flip-flop each, so no net of R1
    // drives all ACC_W bits: docs/activations.md section 3, the wider sum)
    localparam NSG = (PW + 31) / 32;
    (* shreg_extract = "no" *) reg [NSG-1:0] h_neg;
    (* keep *)
    always @(posedge aclk) begin
        h_neg <= {NSG{hi_next[UW-1]}};
    end

    // ------------------------------------------------------------ R1..R5: round to float32
    // |sum| = (sum XOR sign) + sign, each 32 bits' sign from its own copy, in the two halves
    // of the accumulator: the high half's carry in is sign AND (low half zero), known from H2,
    // so the two carry chains are LW and UW bits long, not ACC_W (make timing: 5.9 ns whole)
    reg               r1_neg;
    reg  [PW-1:0]     r1_mag;
    wire [PW-1:0]     h_smask;
    for (gi = 0; gi < PW; gi = gi + 1) begin : g_smask
        assign h_smask[gi] = h_neg[gi / 32];
    end
    wire [PW-1:0]     h_inv = h_sum ^ h_smask;
    always @(posedge aclk) begin
        r1_neg <= h_neg[0];
        r1_mag[LW-1:0]  <= h_inv[LW-1:0] + {{(LW-1){1'b0}}, h_neg[0]};
        r1_mag[PW-1:LW] <= h_inv[PW-1:LW] + {{(UW-1){1'b0}}, h_neg[NSG-1] && h_lz};
    end

    // leading one, in three steps: per 16-bit chunk a nonzero flag and the position of its top
    // set bit (R2), then the highest nonzero chunk of each half of the chunks (R3a: a choice
    // among at most 4, two LUT levels), then of the two and the normalising shift TOP - lead
    // (R3: both subtractions beside the choice)
    wire [NCH*16-1:0] mag_pad = {{(NCH*16-PW){1'b0}}, r1_mag};
    reg               r2_neg;
    reg  [PW-1:0]     r2_mag;
    reg  [NCH-1:0]    r2_nz;
    reg  [NCH*4-1:0]  r2_pos;
    for (gi = 0; gi < NCH; gi = gi + 1) begin : g_chunk
        wire [7:0] ch = mag_pad[16*gi +: 8];
        wire [7:0] cu = mag_pad[16*gi + 8 +: 8];
        wire [2:0] pos_l = ch[7] ? 3'd7 : ch[6] ? 3'd6 : ch[5] ? 3'd5 : ch[4] ? 3'd4
                         : ch[3] ? 3'd3 : ch[2] ? 3'd2 : ch[1] ? 3'd1 : 3'd0;
        wire [2:0] pos_u = cu[7] ? 3'd7 : cu[6] ? 3'd6 : cu[5] ? 3'd5 : cu[4] ? 3'd4
                         : cu[3] ? 3'd3 : cu[2] ? 3'd2 : cu[1] ? 3'd1 : 3'd0;
        wire [3:0] pos = (|cu) ? {1'b1, pos_u} : {1'b0, pos_l};
        always @(posedge aclk) begin
            r2_nz[gi]             <= |{cu, ch};
            r2_pos[4*gi +: 4]     <= pos;
        end
    end
    always @(posedge aclk) begin
        r2_neg <= r1_neg;
        r2_mag  <= r1_mag;
    end

    // R3a: the highest nonzero chunk of each half (chunks 0 .. NLO-1 and NLO .. NCH-1) and
    // its leading one's position (0 when the half is zero)
    reg  [LZW-1:0]    lead_lo, lead_hi;
    integer j;
    always @* begin
        lead_lo = {LZW{1'b0}};
        lead_hi = {LZW{1'b0}};
        for (j = 0; j < NLO; j = j + 1) begin
            if (r2_nz[j]) begin
                lead_lo = {j[LZW-5:0], r2_pos[4*j +: 4]};
            end
        end
        for (j = NLO; j < NCH; j = j + 1) begin
            if (r2_nz[j]) begin
                lead_hi = {j[LZW-5:0], r2_pos[4*j +: 4]};
            end
        end
    end
    reg               r3a_neg, r3a_zero, r3a_hi;
    reg  [PW-1:0]     r3a_mag;
    reg  [LZW-1:0]    r3a_lead_lo, r3a_lead_hi;
    always @(posedge aclk) begin
        // |sum| = 0: no chunk nonzero (the chunks cover it), a compare of NCH flip-flops, not
        // of PW bits in R2 (make timing: r1_mag == 0 was five LUT levels, 5.85 ns calibrated)
        r3a_neg <= r2_neg; r3a_zero <= (r2_nz == {NCH{1'b0}});
        r3a_mag <= r2_mag;
        r3a_hi  <= |r2_nz[NCH-1:NLO];
        r3a_lead_lo <= lead_lo;
        r3a_lead_hi <= lead_hi;
    end

    // R3: the leading one's position and the normalising shift TOP - lead (registered, so R4's
    // barrel shift does not start behind a subtraction; both halves' shifts subtracted from
    // registers, then chosen)
    reg               r3_neg, r3_zero;
    reg  [PW-1:0]     r3_mag;
    reg  [LZW-1:0]    r3_lead;
    reg  [LZW-1:0]    r3_sh;
    always @(posedge aclk) begin
        r3_neg <= r3a_neg; r3_zero <= r3a_zero;
        r3_mag  <= r3a_mag;
        r3_lead <= r3a_hi ? r3a_lead_hi : r3a_lead_lo;
        r3_sh   <= r3a_hi ? TOP - r3a_lead_hi : TOP - r3a_lead_lo;
    end

    // R4a, R4b: normalised, the leading one at bit PW-1: a barrel shift in 4-way steps, one LUT
    // level each, kept apart (synthesis would otherwise build 2-way steps), two steps per stage
    (* keep *) wire [PW-1:0] r4_s1;
    (* keep *) wire [PW-1:0] r4_s3;
    assign r4_s1 = r3_mag << r3_sh[1:0];
    reg               r4a_neg, r4a_zero;
    reg  [PW-1:0]     r4a_mag;
    reg  [LZW-1:0]    r4a_lead;
    reg  [2:0]        r4a_sh;
    always @(posedge aclk) begin
        r4a_neg <= r3_neg; r4a_zero <= r3_zero;
        r4a_mag  <= r4_s1 << {r3_sh[3:2], 2'd0};
        r4a_lead <= r3_lead;
        r4a_sh   <= r3_sh[6:4];
    end
    assign r4_s3 = r4a_mag << {r4a_sh[1:0], 4'd0};
    reg               r4_neg, r4_zero;
    reg  [PW-1:0]     r4_norm;
    reg  [LZW-1:0]    r4_lead;
    always @(posedge aclk) begin
        r4_neg <= r4a_neg; r4_zero <= r4a_zero;
        r4_norm <= r4_s3 << {r4a_sh[2], 6'd0};
        r4_lead <= r4a_lead;
    end

    // R5: the 24 significant bits, the guard bit and the sticky bit (the OR of the rest)
    reg               r5_neg, r5_zero;
    reg  [23:0]       r5_mant;
    reg               r5_guard, r5_sticky;
    // and the exponent field = lead - 48 + 127 for both outcomes of the rounding (R6 chooses,
    // so its increment is not followed by a second adder)
    reg  [7:0]        r5_expo0, r5_expo1;
    always @(posedge aclk) begin
        r5_neg <= r4_neg; r5_zero <= r4_zero;
        r5_mant   <= r4_norm[PW-1 -: 24];
        r5_guard  <= r4_norm[PW-25];
        r5_sticky <= |r4_norm[PW-26:0];
        r5_expo0  <= {1'b0, r4_lead} + 8'd79;
        r5_expo1  <= {1'b0, r4_lead} + 8'd80;
    end

    // R6: rounded to nearest even at 24 significant bits
    wire [24:0]       mant_r = {1'b0, r5_mant} + {24'd0, r5_guard && (r5_sticky || r5_mant[0])};
    wire [7:0]        expo   = mant_r[24] ? r5_expo1 : r5_expo0;
    wire [22:0]       frac   = mant_r[24] ? mant_r[23:1] : mant_r[22:0];
    reg  [31:0]       r6_word;          // the row's word in its last beat's slot, else zero
    always @(posedge aclk) begin
        r6_word <= (r5_zero || !r5_row) ? 32'd0 : {r5_neg, expo, frac};
    end

    assign psum[32*gv +: 32] = r6_word;
    assign ci[gv] = 1'b0;
end
endgenerate

assign bad  = r6_bad;

endmodule

`resetall
