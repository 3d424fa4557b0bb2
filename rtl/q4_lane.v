// 4-bit lane: llama.cpp Q4_1 rows (w = d*q + m per 32-weight block), one beat per clock.
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
//
// Row layout (8-byte beats, built once by the host: generators.q4.pack_q4_rows): per 64
// weights one scale beat {m1, d1, m0, d0} (fp16, d0 in bytes 0-1) ahead of four code beats;
// code beat c of a group holds weights 16c .. 16c+15 of it, weight 16c+j in bits [4j+3:4j]
// (unsigned 4-bit codes). Blocks: code beats 0-1 are block 0 (d0, m0), beats 2-3 block 1.
// The stream controller (GROUP = 4) marks a scale beat with an all-zero byte mask and reads
// 16 x elements (two banks) per code beat; x past K is zero.
//
// Numerics (docs/q4.md): per block the exact integers S = sum q*x and X = sum x; the block's
// d and m converted exactly (fp16 = sig * 2^(sh-24), sig 11 bits signed by the sign bit,
// sh 0..29); d*S*2^sh_d + m*X*2^sh_m summed exactly in an ACC_W-bit integer (units of 2^-24);
// the row's sum rounded once, to nearest even, to float32 (every sum is a float32 normal or
// zero: |value| < 2^(ACC_W-25), the smallest nonzero 2^-24). An fp16 d or m with exponent 31
// (Inf, NaN) in a block holding a weight of index < K counts as zero and raises `bad`.
//
// Out: psum carries the row's float32 bits in the slot of the row's last beat and zero in
// every other slot (the shared back end's accumulator then holds the word), LANE_LAT = 18
// cycles after the lane's inputs (generators/designs/q4.py LANE_STAGES):
//   A0 scale beat held; code beat: per weight the two pair products q0 x + 2 q1 x and
//      q2 x + 2 q3 x (one shift-add level each), x registered
//   A  16 products q*x (one adder level)
//   B  sums of four          C  beat sums S_beat, X_beat
//   D  block sums, fp16 decode          E1 d*S and m*X (2 DSP48, M register)
//   E2 the products in the P register   F1 shifted by the exponents' low two bits
//   F2 shifted by their high three bits (by 4s)
//   G  the two terms added              H  row accumulator (ACC_W bits)
//   R1 sign, magnitude                  R2 per 8-bit chunk: nonzero, top bit, shift
//   R3 leading-one position and the normalising shift TOP - lead
//   R4a, R4b normalised (two stages)    R5 mantissa, guard and sticky bits, both exponents
//   R6 rounded, packed
// Vectors (VECTORS > 1, docs/vectors.md): the scale beat, the fp16 decode and every control
// bit are shared; each vector has its own products, sums, two DSP48 multiplies, accumulator and
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
    // Row accumulator width (from the generator: the exact worst case of max_k; 63 bits
    // at max_k = 2048)
    parameter ACC_W = 63,
    // Activation vectors computed per beat
    parameter VECTORS = 1
)
(
    input  wire                 aclk,
    input  wire                 in_valid,
    input  wire                 in_first,
    input  wire                 in_last,
    input  wire [63:0]          in_w,
    input  wire [128*VECTORS-1:0] in_x,
    input  wire [7:0]           in_bmask,
    output wire [32*VECTORS-1:0] psum,
    output wire [VECTORS-1:0]   ci,
    output wire                 bad
);

localparam PW = ACC_W;              // width of the row sum
localparam LZW = 7;                 // bits of a position in it

initial begin
    if (ACC_W < 59 || ACC_W > 127) begin
        $display("q4_lane: ACC_W=%0d out of range 59..127", ACC_W);
        $finish;
    end
    if (VECTORS < 1 || VECTORS > 255) begin
        $display("q4_lane: VECTORS=%0d out of range 1..255", VECTORS);
        $finish;
    end
end

// ---------------------------------------------------------------- stage 1 bookkeeping
wire        in_scale = in_valid && (in_bmask == 8'd0);
wire        in_code  = in_valid && (in_bmask != 8'd0);
reg  [63:0] scale_r;                // the current group's {m1, d1, m0, d0}
reg  [1:0]  cidx;                   // code beat index in its group
reg         newrow;                 // the next block starts a row: the row sum resets

always @(posedge aclk) begin
    if (in_scale) begin
        scale_r <= in_w;
        cidx    <= 2'd0;
        if (in_first) newrow <= 1'b1;
    end else if (in_code) begin
        cidx <= cidx + 2'd1;
        if (cidx[0] || in_last) newrow <= 1'b0;
    end
end

// ---------------------------------------------------------------- shared: control, scales
// every stage's control bits and the group's scales, once for all vectors
reg               a0_valid, a0_end, a0_second, a0_first, a0_last;
reg  [31:0]       a0_dm;
always @(posedge aclk) begin
    a0_valid  <= in_code;
    a0_end    <= cidx[0] || in_last;
    a0_second <= cidx[0];
    a0_first  <= newrow;
    a0_last   <= in_last;
    a0_dm     <= cidx[1] ? scale_r[63:32] : scale_r[31:0];
end

reg               a_valid, a_end, a_second, a_first, a_last;
reg  [31:0]       a_dm;
always @(posedge aclk) begin
    a_valid <= a0_valid; a_end <= a0_end; a_second <= a0_second; a_first <= a0_first;
    a_last <= a0_last; a_dm <= a0_dm;
end

reg               b_valid, b_end, b_second, b_first, b_last;
reg  [31:0]       b_dm;
always @(posedge aclk) begin
    b_valid <= a_valid; b_end <= a_end; b_second <= a_second; b_first <= a_first;
    b_last <= a_last; b_dm <= a_dm;
end

reg               c_valid, c_end, c_first, c_last;
reg  [31:0]       c_dm;
always @(posedge aclk) begin
    c_valid <= b_valid; c_end <= b_end; c_first <= b_first;
    c_last <= b_last; c_dm <= b_dm;
end

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

reg               d_valid, d_first, d_last;
reg  [17:0]       d_d, d_m;
always @(posedge aclk) begin
    d_valid <= c_valid && c_end;
    d_first <= c_first;
    d_last  <= c_last;
    d_d <= f16dec(c_dm[15:0]);
    d_m <= f16dec(c_dm[31:16]);
end
wire signed [11:0] sig_d = d_d[11:0];
wire signed [11:0] sig_m = d_m[11:0];

// E1, E2: the control bits and the exponents wait out the two multiplies' registers in one
// 2-deep delay line of the bundle {valid, first, last, bad, shd[4:0], shm[4:0]}
localparam EW = 4 + 2*5;            // bits of the bundle: four flags, two 5-bit shifts
reg  [EW-1:0]     e1_ctl, e_ctl;
always @(posedge aclk) begin
    e1_ctl <= {d_valid, d_first, d_last, d_valid && (d_d[17] || d_m[17]),
               d_d[16:12], d_m[16:12]};
    e_ctl  <= e1_ctl;
end
wire              e_valid, e_first, e_last, e_bad;
wire [4:0]        e_shd, e_shm;
assign {e_valid, e_first, e_last, e_bad, e_shd, e_shm} = e_ctl;

// F1: the exponents' high bits wait one cycle for F2
reg               f1_valid, f1_first, f1_last, f1_bad;
reg  [2:0]        f1_shd, f1_shm;
always @(posedge aclk) begin
    f1_valid <= e_valid; f1_first <= e_first; f1_last <= e_last; f1_bad <= e_bad;
    f1_shd <= e_shd[4:2]; f1_shm <= e_shm[4:2];
end

reg               f_valid, f_first, f_last, f_bad;
always @(posedge aclk) begin
    f_valid <= f1_valid; f_first <= f1_first; f_last <= f1_last; f_bad <= f1_bad;
end

reg               g_last, g_bad;
always @(posedge aclk) begin
    g_last <= f_last; g_bad <= f_bad;
end

reg               h_row, h_bad;
reg               r1_row, r1_bad;
reg               r2_row, r2_bad;
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
    r1_row <= h_row; r1_bad <= h_bad;
    r2_row <= r1_row; r2_bad <= r1_bad;
    r3_row <= r2_row; r3_bad <= r2_bad;
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
localparam [LZW-1:0] TOP = PW - 1;

// ---------------------------------------------------------------- per vector: the datapath
genvar gv, gi;
generate
for (gv = 0; gv < VECTORS; gv = gv + 1) begin : g_vec
    wire [127:0] vx = in_x[128*gv +: 128];

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
            a0_x[8*gi +: 8]     <= vx[8*gi +: 8];
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

    (* shreg_extract = "no" *) reg c_second;   // selects two sums: a flip-flop, not an SRL's end
    (* keep *)
    always @(posedge aclk) begin
        c_second <= b_second;
    end
    reg  signed [15:0] c_s;
    reg  signed [11:0] c_x;
    always @(posedge aclk) begin
        c_s <= b_p[15:0] + b_p[31:16] + b_p[47:32] + b_p[63:48];
        c_x <= b_x[11:0] + b_x[23:12] + b_x[35:24] + b_x[47:36];
    end

    // ------------------------------------------------------------ D: block sums
    reg  signed [15:0] hold_s;
    reg  signed [11:0] hold_x;
    reg  signed [16:0] d_s;
    reg  signed [12:0] d_x;
    always @(posedge aclk) begin
        if (c_valid && !c_second) begin
            hold_s <= c_s;
            hold_x <= c_x;
        end
        d_s <= (c_second ? {hold_s[15], hold_s} : 17'sd0) + {c_s[15], c_s};
        d_x <= (c_second ? {hold_x[11], hold_x} : 13'sd0) + {c_x[11], c_x};
    end

    // ------------------------------------------------------------ E1, E2: the two multiplies
    // the product registered twice: in the DSP48's M register (E1) and its P register (E2), so
    // the F shift starts 0.43 ns after the clock, not 2.3 ns (docs/timing.md)
    (* use_dsp = "yes" *) reg signed [27:0] e1_pd;
    (* use_dsp = "yes" *) reg signed [23:0] e1_pm;
    always @(posedge aclk) begin
        e1_pd    <= sig_d * d_s;
        e1_pm    <= sig_m * d_x;
    end
    (* use_dsp = "yes" *) reg signed [27:0] e_pd;
    (* use_dsp = "yes" *) reg signed [23:0] e_pm;
    always @(posedge aclk) begin
        e_pd    <= e1_pd;
        e_pm    <= e1_pm;
    end

    // ------------------------------------------------------------ F1, F2, G: shifted, added
    // the shift by 0..31 in two stages: by the exponent's low two bits (a 4-way step, one LUT
    // level), then by its high three bits in steps of 4 (an 8-way step)
    reg  signed [30:0] f1_td;
    reg  signed [26:0] f1_tm;
    always @(posedge aclk) begin
        f1_td <= {{3{e_pd[27]}}, e_pd} <<< e_shd[1:0];
        f1_tm <= {{3{e_pm[23]}}, e_pm} <<< e_shm[1:0];
    end
    reg  signed [56:0] f_td;
    reg  signed [52:0] f_tm;
    always @(posedge aclk) begin
        f_td <= {{26{f1_td[30]}}, f1_td} <<< {f1_shd, 2'b00};
        f_tm <= {{26{f1_tm[26]}}, f1_tm} <<< {f1_shm, 2'b00};
    end

    // g_valid drives the whole accumulator: a flip-flop of its own, not the end of a
    // shift-register LUT (`keep` for yosys, `shreg_extract` for Vivado)
    (* shreg_extract = "no" *) reg g_valid;
    reg  signed [57:0] g_t;
    (* keep *)
    always @(posedge aclk) begin
        g_valid    <= f_valid;
    end
    always @(posedge aclk) begin
        g_t <= {f_td[56], f_td} + {{5{f_tm[52]}}, f_tm};
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
    reg  signed [PW-1:0] acc;
    reg  signed [PW-1:0] h_sum;
    wire signed [PW-1:0] acc_next = acc + {{(PW-58){g_t[57]}}, g_t};
    always @(posedge aclk) begin
        if (f_first)      acc <= {PW{1'b0}};
        else if (g_valid) acc <= acc_next;
        h_sum <= acc_next;
    end

    // ------------------------------------------------------------ R1..R5: round to float32
    reg               r1_neg;
    reg  [PW-1:0]     r1_mag;
    always @(posedge aclk) begin
        r1_neg <= h_sum[PW-1];
        r1_mag <= h_sum[PW-1] ? -h_sum : h_sum;
    end

    // leading one, in two steps: per 16-bit chunk a nonzero flag, the position of its top set
    // bit and the normalising shift TOP - position (R2), then the highest nonzero chunk and the
    // position and shift of it (R3: a choice among NCH = 4 chunks at ACC_W 63, two LUT levels)
    wire [NCH*16-1:0] mag_pad = {{(NCH*16-PW){1'b0}}, r1_mag};
    reg               r2_neg, r2_zero;
    reg  [PW-1:0]     r2_mag;
    reg  [NCH-1:0]    r2_nz;
    reg  [NCH*4-1:0]  r2_pos;
    reg  [NCH*LZW-1:0] r2_sh;
    for (gi = 0; gi < NCH; gi = gi + 1) begin : g_chunk
        localparam [LZW-1:0] CH_TOP = TOP - 16*gi;  // the shift of the chunk's bit 0
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
            r2_sh[LZW*gi +: LZW]  <= CH_TOP - {{(LZW-4){1'b0}}, pos};
        end
    end
    always @(posedge aclk) begin
        r2_neg <= r1_neg;
        r2_zero <= (r1_mag == {PW{1'b0}});
        r2_mag  <= r1_mag;
    end

    reg  [LZW-1:0]    lead;
    reg  [LZW-1:0]    lead_sh;          // TOP - lead
    integer j;
    always @* begin
        lead = {LZW{1'b0}};
        lead_sh = TOP;
        for (j = 0; j < NCH; j = j + 1) begin
            if (r2_nz[j]) begin
                lead = {j[LZW-5:0], r2_pos[4*j +: 4]};
                lead_sh = r2_sh[LZW*j +: LZW];
            end
        end
    end

    // R3: the leading one's position and the normalising shift TOP - lead (registered, so R4's
    // barrel shift does not start behind a subtraction; chosen, not subtracted, here)
    reg               r3_neg, r3_zero;
    reg  [PW-1:0]     r3_mag;
    reg  [LZW-1:0]    r3_lead;
    reg  [LZW-1:0]    r3_sh;
    always @(posedge aclk) begin
        r3_neg <= r2_neg; r3_zero <= r2_zero;
        r3_mag  <= r2_mag;
        r3_lead <= lead;
        r3_sh   <= lead_sh;
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
    // and the exponent field = lead - 24 + 127 for both outcomes of the rounding (R6 chooses,
    // so its increment is not followed by a second adder)
    reg  [7:0]        r5_expo0, r5_expo1;
    always @(posedge aclk) begin
        r5_neg <= r4_neg; r5_zero <= r4_zero;
        r5_mant   <= r4_norm[PW-1 -: 24];
        r5_guard  <= r4_norm[PW-25];
        r5_sticky <= |r4_norm[PW-26:0];
        r5_expo0  <= {1'b0, r4_lead} + 8'd103;
        r5_expo1  <= {1'b0, r4_lead} + 8'd104;
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
