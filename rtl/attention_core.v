// GQA decode attention, one KV head group of G query heads per frame: the whole engine but
// the exp table (docs/attention.md; frame format section 2, arithmetic section 3, structure
// section 9).
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// The generated top (generators/templates/attention_engine.v.j2) instantiates this module with
// the design's parameters and the delays of the latency model AttentionTiming
// (generators/designs/attention.py), and the exp table (a block ROM with literal contents)
// beside it on the exp_addr / exp_q pins. Every per-head and per-byte structure is a generate
// loop here: heads `hd[g]`, elements of a beat `ln[j]` inside a head, the K adder tree `kt`,
// the |acc| maximum tree `mt`, the four result dividers `yk[k]`. K and V are INT8 or INT16
// codes (KV_BITS; q is INT8): a beat holds NE = BB * 8 / KV_BITS elements of K or V, and every
// width below follows from KV_BITS (docs/attention.md 3.1).
//
// Pipeline (docs/attention.md 9; every register-to-register path at most 6.0 ns in the timing
// model of docs/timing.md: DSP48 operands and products registered, no LUT between a block RAM
// and its output register, the registers that address the accumulators replicated):
//   input reg     the beat registered with the header checks precomputed from the port
//   input FSM     one-hot: header block, q (held per head in LUTRAM), K rows, V rows, drain
//   K pipeline    K1 beat and q slices, K2 q.k products (DSP), the per-head adder tree
//                 (registered at the levels K_TREE_REG_LEVELS: after level 1, so each pair of
//                 products is summed in a DSP48 cascade into its P register), K4 row
//                 accumulate, K5 score RAM write and running maximum
//   weight unit   TRIG_DELAY cycles after a V row's first beat: score RAM read (read and output
//                 registers), every head's e = m - s registered (W0), then one head per
//                 clock: e selected, e*MULT + rnd (DSP; with EP_SPLIT two cascaded DSPs, one
//                 more stage), >> SHIFT, exp table (2 cycles), weight register
//   V pipeline    V beats delayed V_DELAY cycles; M0 the p.v operands registered (the
//                 DSP48's A and B registers), M1/M2 products in its M and P registers, M3
//                 accumulators in LUTRAM (read-modify-write at {bank, beat in row}; address
//                 and enable replicated per lane by MAX_FANOUT), S per head, M4 sums, M5
//                 order keys, then
//                 A = max |acc| on the last row (registered tree of pairwise maxima)
//   finisher      takes a frame FIN_WAIT cycles after its tlast, then 4 pipelined 8-bit
//                 dividers give one result word per clock, G sequential ZQ-bit dividers give
//                 Z, then the status word; writes to the output FIFO are registered
//   back to back  accumulators, A, S and the scale words are double-buffered (bank bit per
//                 frame): the next frame streams in while the finisher works. A frame's first
//                 beat is accepted once the finisher has written the status word of the frame
//                 before the previous one; s_axis_tready is otherwise always high.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_core #
(
    // Query heads per frame (G), 1..8
    parameter G = 3,
    // Elements per head (d), a multiple of BB
    parameter D = 64,
    // Bytes per input beat: 8 (64-bit s_axis) or 16 (128-bit s_axis)
    parameter BB = 8,
    // Width of the K and V codes: 8 (INT8, a byte an element) or 16 (INT16, two bytes
    // little-endian); q is INT8 either way
    parameter KV_BITS = 8,
    // Largest context length L accepted, 1..65535
    parameter LMAX = 2048,
    // Exp table entries
    parameter EDEPTH = 4096,
    // Exp table address width
    parameter EAW = (EDEPTH > 1) ? $clog2(EDEPTH) : 1,
    // Exp table entry width in bits (2..24)
    parameter W = 24,
    // Fraction bits of the Z scale word
    parameter F = 24,
    // Z quotient bits (AttentionTiming.z_bits)
    parameter ZQ = F + KV_BITS,
    // Frame magic (header bytes 0..1)
    parameter [15:0] MAGIC = 16'hA77E,
    // K adder tree: bit l-1 set when level l (1..log2 of the K elements per beat) is
    // registered (the generator's Tree)
    parameter [7:0] K_TREE_REG_LEVELS = 8'b0000_0110,
    // 1: e * MULT + rnd in two cascaded DSP48 stages (e wider than 24 bits: INT16 K), one
    // more weight stage (AttentionTiming.ep_split); 0: one DSP48 stage
    // (e = m - s has bitlen(D << (6 + KV_BITS)) bits: more than 24 from D = 2^(18 - KV_BITS))
    parameter EP_SPLIT = (D >= (1 << (18 - KV_BITS))) ? 1 : 0,
    // V row start (V input register) -> score RAM read (AttentionTiming.trig_delay)
    parameter TRIG_DELAY = 5,
    // V input register -> p*v stage (AttentionTiming.v_delay)
    parameter V_DELAY = 14,
    // FSM sees tlast -> the frame leaves the drain line (AttentionTiming.fin_wait)
    parameter FIN_WAIT = 20,
    // log2 of the output FIFO depth
    parameter FIFO_ADDR_W = 6,
    // Output FIFO room margin: one frame's output words plus 2
    parameter FIFO_MARGIN = G * D / 4 + G + 2
)
(
    input  wire             aclk,
    input  wire             aresetn,      // registered once in the engine's top (docs/timing.md)
    input  wire             port_rst_n,   // the raw ARESETn: clears tready and tvalid a cycle
                                          // earlier (the cycle after it is sampled low)

    input  wire [8*BB-1:0]  s_axis_tdata,
    input  wire             s_axis_tvalid,
    output wire             s_axis_tready,
    input  wire             s_axis_tlast,

    output wire [31:0]      m_axis_tdata,
    output wire [3:0]       m_axis_tkeep,
    output wire             m_axis_tvalid,
    input  wire             m_axis_tready,
    output wire             m_axis_tlast,

    // the exp table: a block ROM with read and output registers (exp_q follows exp_addr by
    // 2 cycles)
    output wire [EAW-1:0]   exp_addr,
    input  wire [W-1:0]     exp_q
);

// ------------------------------------------------------------------ derived constants
function integer bitlen(input [63:0] x);    // bits of x (Python's int.bit_length)
    integer i;
    begin
        bitlen = 0;
        for (i = 0; i < 64; i = i + 1) begin
            if (x[i]) begin
                bitlen = i + 1;
            end
        end
    end
endfunction

function integer popcount8(input [7:0] x);
    integer i;
    begin
        popcount8 = 0;
        for (i = 0; i < 8; i = i + 1) begin
            popcount8 = popcount8 + x[i];
        end
    end
endfunction

localparam KVB   = KV_BITS / 8;                   // bytes of a K or V element
localparam NE    = BB / KVB;                      // K or V elements per beat
localparam RB    = D * KVB / BB;                  // beats per K or V row
localparam QRB   = D / BB;                        // beats of one head's q
localparam HB    = (8 + 4 * G + BB - 1) / BB;     // header beats
localparam MT    = $clog2(NE);                    // levels of the K tree and of the |acc| tree
localparam WPB   = NE / 4;                        // result words per beat of a row
localparam FHW   = (MT > 2) ? MT - 2 : 1;         // result word within a beat: counter width
localparam TW    = (LMAX > 1) ? $clog2(LMAX) : 1; // row counter width
localparam RBW   = (RB > 1) ? $clog2(RB) : 1;     // beat-in-row counter width
localparam QRBW  = (QRB > 1) ? $clog2(QRB) : 1;   // beat-in-q-head counter width
localparam GW    = (G > 1) ? $clog2(G) : 1;       // head counter width
localparam HBW   = (HB > 1) ? $clog2(HB) : 1;     // header beat counter width
localparam RBA   = RBW + 1;                       // accumulator LUTRAM address: {bank, beat}
localparam SB    = bitlen(D << (6 + KV_BITS)) + 1;   // score width (signed)
localparam KPW   = 8 + KV_BITS;                   // q * k product width (signed)
localparam PSB   = KPW + MT;                      // one beat's partial score width (signed)
localparam EHW   = (SB > 18) ? SB - 17 : 1;       // e's high part (EP_SPLIT: e >> 17)
localparam MPW   = W + 1 + KV_BITS;               // p * v product width (signed)
// accumulator width (signed): holds L * (2^W - 1) * 2^(KV_BITS-1), and at least one p * v
// product
localparam AB0   = bitlen(LMAX * ((64'd1 << W) - 64'd1) * (64'd1 << (KV_BITS - 1))) + 1;
localparam AB    = (AB0 > MPW) ? AB0 : MPW;
localparam AZP   = (AB + 5) / 6;                  // 6-bit pieces of an AB-bit "!= 0"
localparam SWID  = bitlen(LMAX * ((64'd1 << W) - 64'd1));   // S width (unsigned)
localparam ZN    = ((AB + F + 1 > SWID) ? AB + F + 1 : SWID) + 1;   // Z numerator width
localparam ZD    = SWID + 1;                      // Z denominator width
localparam P1W   = (EAW + 15 < 48) ? EAW + 15 : 48;   // first shift step's output width
localparam NY    = G * D / 4;                     // result words per frame
localparam NYW   = $clog2(NY + 1);                // result word counter width
localparam K_TREE_REGS = popcount8(K_TREE_REG_LEVELS);   // K tree register stages

// sized copies for comparisons with counters (the values fit; the truncation is of zeros)
/* verilator lint_off WIDTHTRUNC */
localparam [15:0]    OUT_COUNT = NY + G;          // output words before the status word
localparam [15:0]    LMAX16    = LMAX;
localparam [7:0]     G8        = G;
localparam [15:0]    D16       = D;
localparam [TW-1:0]  T1        = 1;
localparam [HBW-1:0] HB_M2     = HB - 2;
localparam [RBW-1:0] RB_M1     = RB - 1;
localparam [RBW-1:0] RB_M2     = (RB > 1) ? RB - 2 : 0;
localparam [0:0]     RB_IS1    = (RB == 1);
localparam [QRBW-1:0] QRB_M2   = (QRB > 1) ? QRB - 2 : 0;
localparam [0:0]     QRB_IS1   = (QRB == 1);
localparam [7:0]     KV_CODE   = KVB - 1;          // a scale word's byte 3: 0 INT8, 1 INT16
localparam [GW-1:0]  G_M1      = G - 1;
localparam [G-1:0]   G_ONE     = 1;                 // fgh of head 0
localparam [GW-1:0]  G_M2      = (G > 1) ? G - 2 : 0;
localparam [0:0]     G_IS1     = (G == 1);
localparam [FHW-1:0] FH_LAST   = WPB - 1;
localparam [FHW-1:0] FH_1      = (WPB > 1) ? 1 : 0;   // fh's step (no step with one word)
localparam [NYW-1:0] NY_M1     = NY - 1;
localparam [47:0]    EDEPTH48  = EDEPTH;
localparam [AB-1:0]  SIX1      = 63;                // a 6-bit piece
localparam [5:0]     BIG_SH    = 49 - bitlen(EDEPTH);   // EDEPTH << SHIFT >= 2^48 from here
/* verilator lint_on WIDTHTRUNC */

initial begin
    if (BB != 8 && BB != 16) begin
        $display("attention_core: BB=%0d must be 8 or 16", BB);
        $finish;
    end
    if (KV_BITS != 8 && KV_BITS != 16) begin
        $display("attention_core: KV_BITS=%0d must be 8 or 16", KV_BITS);
        $finish;
    end
    if (AB0 > 48 || KV_BITS - 1 + F > 31) begin
        $display("attention_core: KV_BITS=%0d W=%0d LMAX=%0d F=%0d: acc needs %0d bits > 48 %s",
                 KV_BITS, W, LMAX, F, AB0, "or Z exceeds 2^31 (KV_BITS - 1 + F > 31)");
        $finish;
    end
    if (EP_SPLIT != ((SB - 1 > 24) ? 1 : 0)) begin
        $display("attention_core: EP_SPLIT=%0d, must be %0d (e has %0d bits, one DSP48 takes 24)",
                 EP_SPLIT, (SB - 1 > 24) ? 1 : 0, SB - 1);
        $finish;
    end
    if (G < 1 || G > 8 || D % BB != 0 || RB < G || HB < 2) begin
        $display("attention_core: illegal G=%0d D=%0d BB=%0d (G 1..8, D a multiple of BB, %s",
                 G, D, BB, "D/BB >= G, a header of at least 2 beats)");
        $finish;
    end
    if (LMAX < 1 || LMAX > 65535 || W < 2 || W > 24 || EDEPTH < 2 || (1 << EAW) < EDEPTH) begin
        $display("attention_core: illegal LMAX=%0d W=%0d EDEPTH=%0d EAW=%0d", LMAX, W, EDEPTH,
                 EAW);
        $finish;
    end
    if (K_TREE_REG_LEVELS[MT-1] != 1'b1 || (K_TREE_REG_LEVELS >> MT) != 8'd0 || ZQ > 32
            || TRIG_DELAY < 2 || V_DELAY < 1 || FIN_WAIT < 1) begin
        $display("attention_core: illegal K_TREE_REG_LEVELS=%b ZQ=%0d or delays %0d %0d %0d",
                 K_TREE_REG_LEVELS, ZQ, TRIG_DELAY, V_DELAY, FIN_WAIT);
        $finish;
    end
end

genvar g, j, k, l;

// ------------------------------------------------------------------ input register
// The beat is registered first (with the header checks, L - 1 and L - 2, and the format check
// of every 4-byte slot precomputed from the port); the FSM works on the registered beat, so
// no port reaches deeper than those checks and every FSM decision is on register outputs.
reg            rdy;
reg  [1:0]     nout;      // frames whose tlast was accepted and whose status is not written
reg            r0v;
reg            r0l;
reg  [8*BB-1:0] r0d;
reg            r0magic;
reg            r0shape;   // 1 <= L <= max_context
reg            r0gd;      // G and d as generated
reg  [TW-1:0]  r0lm2;
reg            r0l1;
/* verilator lint_off UNUSEDSIGNAL */
reg  [BB/4-1:0] r0slotbad;   // slots that hold no scale word are not checked
/* verilator lint_on UNUSEDSIGNAL */

wire [8*BB-1:0] din = s_axis_tdata;
wire        hs  = s_axis_tvalid && rdy;
assign s_axis_tready = rdy;

// a scale word's slot (4 bytes: MULT, SHIFT, KV format code) is bad when SHIFT > 47 or byte 3
// is not the engine's KV format code (0 INT8, 1 INT16)
wire [BB/4-1:0] slotbad_now;
generate
for (k = 0; k < BB / 4; k = k + 1) begin : slot
    assign slotbad_now[k] = (din[32*k+16 +: 8] > 8'd47) || (din[32*k+24 +: 8] != KV_CODE);
end
endgenerate

// L <= max_context (always true at 65535)
wire len_le_max;
generate
if (LMAX < 65535) begin : len_chk
    assign len_le_max = (din[31:16] <= LMAX16);
end else begin : len_any
    assign len_le_max = 1'b1;
end
endgenerate

always @(posedge aclk) begin
    r0v       <= aresetn && hs;
    r0l       <= s_axis_tlast;
    r0d       <= din;
    r0magic   <= (din[15:0] == MAGIC);
    r0shape   <= (din[31:16] != 16'd0) && len_le_max;
    r0gd      <= (din[39:32] == G8) && (din[55:40] == D16);
    r0lm2     <= din[16 +: TW] - T1 - T1;
    r0l1      <= (din[16 +: TW] == T1);
    r0slotbad <= slotbad_now;
end

// ------------------------------------------------------------------ input FSM
// One-hot state; every decision is a short function of registered flags (hcnt == 0 and
// == HB - 1, last beat of a row / of the last row, last q beat, the precomputed header checks).
reg            s_hdr, s_q, s_k, s_v, s_drain;
reg            ib;        // bank of the frame at the input (toggles with every tlast)
reg  [HBW-1:0] hcnt;
reg            h0;        // hcnt == 0
reg            hl;        // hcnt == HB - 1
reg            fbad;
reg  [GW-1:0]  qg;
reg  [QRBW-1:0] qb;
reg            qbl;       // qb == QRB - 1
reg            qgl;       // qg == G - 1
reg  [RBW-1:0] bcnt;
reg            bl;        // bcnt == RB - 1
reg  [TW-1:0]  tcnt;
reg            tl;        // tcnt == L - 1
reg            t0;        // tcnt == 0
reg  [TW-1:0]  lm2;
reg            l1;
reg  [7:0]     tag;
reg  [4:0]     flags;
reg            ph_wait, ph_room, ph_y, ph_zw, ph_zout, ph_stat;   // finisher phase
(* max_fanout = 24 *) reg fbank;   // the finisher's frame: bank, tag, flags, results sent
                                   // (fbank, fb: the accumulators' read address, replicated)
// fbank's twin for every head's A and S selects (Af, Sf: about 180 loads, the Z divider's
// numerator adder behind them): a register of its own, kept so synthesis neither merges it
// with fbank nor rebuilds it without its MAX_FANOUT (docs/timing.md)
(* keep = "true", max_fanout = 24 *) reg fsel;
reg  [7:0]     ftag;
reg  [4:0]     fflags;
reg            fres;      // fflags[3:0] == 0: good or long frame, results are sent
reg  [GW-1:0]  fg;
// fg one-hot (fgh[g]: fg == g; 0 after the last head), set where fg is: the selects of every
// head's Y1 read and A (x, yden, yazp: about 250 loads a head in the INT16 engine) come from
// flip-flops with MAX_FANOUT, not from fg's decode (make timing: 7.0 ns in the INT16 top,
// fg's 47 loads and two decode LUTs of 132 and 78 loads before the select; docs/timing.md)
(* max_fanout = 24 *) reg [G-1:0] fgh;
(* max_fanout = 24 *) reg [RBW-1:0] fb;
// fh selects the word of every head's Y1 read (yrd_h: 500 LUTs) and zstart starts every
// head's divider (300 loads): MAX_FANOUT has Vivado replicate them (UG901), as the calibrated
// timing model's data covers nets up to 258 loads (issue 30 item 3, docs/timing.md)
(* max_fanout = 64 *) reg [FHW-1:0] fh;   // result word within the beat
reg  [GW-1:0]  zg;
(* max_fanout = 64 *) reg zstart;
reg  [NYW-1:0] ycnt;
reg            ydone;

wire hs1   = r0v;
wire last1 = r0l;
// format check of the scale words (scale word g is bytes 8 + 4g .. 11 + 4g of the header):
// the last header beat's slots as it arrives, the earlier beats' collected in fbad
wire [G-1:0] fmt_last_g;   // head g's scale word is in the last header beat and bad
wire [G-1:0] fmt_mid_g;    // head g's scale word is in this (earlier) header beat and bad
wire fmt_bad_now = |fmt_last_g;
wire hdr_bad  = !r0magic || !r0shape || !r0gd;   // header word rejected (beat 0)
wire fmt_bad  = fbad || fmt_bad_now;    // scale words rejected (last header beat)
wire row_end  = bl && tl;               // last beat of the last row of K or V
wire q_end    = qbl && qgl;             // last beat of q
wire y_end    = (fh == FH_LAST) && (fb == RB_M1) && (fg == G_M1);
wire zgl      = (zg == G_M1);
// what the beat in the input register does (checked in the order of docs section 2.3)
wire e_magic  = hs1 && s_hdr && h0 && !r0magic;
wire e_shape  = hs1 && s_hdr && h0 && r0magic && !(r0shape && r0gd);
wire e_format = hs1 && s_hdr && hl && fmt_bad;
wire e_short  = hs1 && last1 && ((s_hdr && !(h0 && hdr_bad) && !(hl && fmt_bad)) || s_q || s_k
                                 || (s_v && !row_end));
wire e_long   = hs1 && !last1 && s_v && row_end;
wire hdr_done = last1 || hl || (h0 && hdr_bad);   // the header parser returns to beat 0

// finisher signals used by the FSM
wire        room;
wire        zdone;
wire        pv;           // a frame waits for the finisher
wire        take = ph_wait && pv;
// the input stalls after a tlast while two frames are outstanding (the finisher has not
// written the status word of the frame before): their banks are both in use
wire        tl_hs = hs && s_axis_tlast;
wire [1:0]  nout_nx = nout + {1'b0, tl_hs} - {1'b0, ph_stat};

always @(posedge aclk) begin
    if (!aresetn) begin
        s_hdr   <= 1'b1;
        s_q     <= 1'b0;
        s_k     <= 1'b0;
        s_v     <= 1'b0;
        s_drain <= 1'b0;
        ib      <= 1'b0;
        rdy     <= 1'b0;
        nout    <= 2'd0;
        hcnt    <= {HBW{1'b0}};
        h0      <= 1'b1;
        hl      <= 1'b0;
        flags   <= 5'd0;
        ph_wait <= 1'b1;
        ph_room <= 1'b0;
        ph_y    <= 1'b0;
        ph_zw   <= 1'b0;
        ph_zout <= 1'b0;
        ph_stat <= 1'b0;
        fg      <= {GW{1'b0}};
        fgh     <= G_ONE;
        fb      <= {RBW{1'b0}};
        fh      <= {FHW{1'b0}};
        zg      <= {GW{1'b0}};
        zstart  <= 1'b0;
    end else begin
        zstart <= 1'b0;
        nout   <= nout_nx;
        rdy    <= (nout_nx != 2'd2);
        // state (one-hot): every tlast ends the frame; the next frame's header may follow at once
        s_drain <= (s_drain || e_magic || e_shape || e_format || e_long) && !(hs1 && last1);
        s_hdr   <= (hs1 && last1) || (s_hdr && !(hs1 && hdr_done));
        s_q     <= (hs1 && s_hdr && hl && !last1 && !fmt_bad) || (s_q && !(hs1 && (last1 || q_end)));
        s_k     <= (hs1 && s_q && !last1 && q_end) || (s_k && !(hs1 && (last1 || row_end)));
        s_v     <= (hs1 && s_k && !last1 && row_end) || (s_v && !(hs1 && (last1 || row_end)));
        flags   <= (hs1 && last1) ? 5'd0 : (flags | {e_long, e_short, e_format, e_shape, e_magic});
        ib      <= ib ^ (hs1 && last1);
        // header beat counter
        if (hs1 && s_hdr) begin
            if (hdr_done) begin
                hcnt <= {HBW{1'b0}};
                h0   <= 1'b1;
                hl   <= 1'b0;
            end else begin
                hcnt <= hcnt + 1'b1;
                h0   <= 1'b0;
                hl   <= (hcnt == HB_M2);
            end
        end
        // finisher phase (one-hot): idle until a frame is pending, room for its words, result
        // words, wait for the dividers, scale words, status
        ph_wait <= ph_stat || (ph_wait && !pv);
        ph_room <= take || (ph_room && !room);
        ph_y    <= (ph_room && room && fres) || (ph_y && !y_end);
        ph_zw   <= (ph_y && y_end) || (ph_zw && !(zdone && ydone));
        ph_zout <= (ph_zw && zdone && ydone) || (ph_zout && !zgl);
        ph_stat <= (ph_room && room && !fres) || (ph_zout && zgl);
        if (ph_room && room && fres) begin
            zstart <= 1'b1;
            fg     <= {GW{1'b0}};
            fgh    <= G_ONE;
            fb     <= {RBW{1'b0}};
            fh     <= {FHW{1'b0}};
        end
        if (ph_y) begin
            fh <= fh + FH_1;
            if (fh == FH_LAST) begin
                if (fb == RB_M1) begin
                    fb  <= {RBW{1'b0}};
                    fg  <= fg + 1'b1;
                    fgh <= fgh << 1;
                end else begin
                    fb <= fb + 1'b1;
                end
            end
        end
        if (ph_zw) begin
            zg <= {GW{1'b0}};
        end
        if (ph_zout) begin
            zg <= zg + 1'b1;
        end
    end
    // s_axis_tready: low in the cycle after the raw reset is sampled low (AXI4-Stream reset)
    if (!port_rst_n) begin
        rdy <= 1'b0;
    end
end

// ------------------------------------------------------------------ drain and hand-over
// When the FSM sees a tlast, the frame's tag, flags and bank enter a delay line of FIN_WAIT
// cycles (every in-flight beat lands, A and S are final), then wait in the pending register
// until the finisher is idle. The input gate (nout) keeps at most one frame pending.
wire [4:0]  ev_flags = flags | {e_long, e_short, e_format, e_shape, e_magic};
wire [7:0]  ev_tag   = (s_hdr && h0) ? r0d[63:56] : tag;   // a one-beat frame: its own tag
wire        dv;
wire [7:0]  dtag;
wire [4:0]  dflags;
wire        dbank;
delay_line #(.WIDTH(15), .CTRL_W(1), .DEPTH(FIN_WAIT)) drain_dl (
    .clk(aclk), .rst_n(aresetn),
    .d({ev_tag, ev_flags, ib, hs1 && last1}),
    .q({dtag, dflags, dbank, dv})
);
reg         pvr;
reg  [7:0]  ptag;
reg  [4:0]  pflags;
reg         pbank;
reg         pres;
assign pv = pvr;
always @(posedge aclk) begin
    if (!aresetn) begin
        pvr <= 1'b0;
    end else if (dv) begin
        pvr <= 1'b1;
        // synthesis translate_off
        if (pvr && !take) begin
            $display("ERROR: %m: a frame reached the finisher while one was pending at %0t", $time);
        end
        // synthesis translate_on
    end else if (take) begin
        pvr <= 1'b0;
    end
    if (dv) begin
        ptag   <= dtag;
        pflags <= dflags;
        pbank  <= dbank;
        pres   <= (dflags[3:0] == 4'd0);
    end
    if (take) begin
        ftag   <= ptag;
        fflags <= pflags;
        fbank  <= pbank;
        fsel   <= pbank;
        fres   <= pres;
    end
end

// the row counters' clear (their synchronous reset) and the last beat of K or V accepted as
// kept nets: each one LUT of register outputs, so the clear is two LUT levels after hs1, not
// mapped together with hs1's other loads into three (make timing, INT16 K and V with 16 row
// beats: hs1 -> bcnt 6.07 ns)
(* keep *) wire hs_re;
(* keep *) wire rc_clr;
assign hs_re  = hs1 && bl && tl;
assign rc_clr = !(s_k || s_v) || hs_re;

// header fields and q / row counters (no reset needed: loaded before use)
always @(posedge aclk) begin
    if (hs1 && s_hdr) begin
        if (h0) begin
            tag  <= r0d[63:56];
            lm2  <= r0lm2;
            l1   <= r0l1;
            fbad <= 1'b0;
        end
        if (|fmt_mid_g) begin
            fbad <= 1'b1;
        end
    end
    // q beat counters: at their start values outside the q section
    if (!s_q) begin
        qb  <= {QRBW{1'b0}};
        qg  <= {GW{1'b0}};
        qbl <= QRB_IS1;
        qgl <= G_IS1;
    end else if (hs1) begin
        if (qbl) begin
            qb  <= {QRBW{1'b0}};
            qbl <= QRB_IS1;
            qg  <= qg + 1'b1;
            qgl <= G_IS1 || (qg == G_M2);
        end else begin
            qb  <= qb + 1'b1;
            qbl <= QRB_IS1 || (qb == QRB_M2);
        end
    end
    // K / V row counters: at their start values outside K and V, and again after K
    if (rc_clr) begin
        bcnt <= {RBW{1'b0}};
        bl   <= RB_IS1;
        tcnt <= {TW{1'b0}};
        t0   <= 1'b1;
        tl   <= l1;
    end else if (hs1) begin
        if (bl) begin
            bcnt <= {RBW{1'b0}};
            bl   <= RB_IS1;
            tcnt <= tcnt + 1'b1;
            t0   <= 1'b0;
            tl   <= (tcnt == lm2);
        end else begin
            bcnt <= bcnt + 1'b1;
            bl   <= RB_IS1 || (bcnt == RB_M2);
        end
    end
end

// ------------------------------------------------------------------ K and V input stages
// K1: beat registered (the q slices are registered per head below)
reg            k1v;
reg            k1first;
reg            k1last;
reg            k1row0;
reg  [TW-1:0]  k1t;
reg  [8*BB-1:0] k1d;
always @(posedge aclk) begin
    k1v     <= aresetn && hs1 && s_k;
    k1first <= (bcnt == {RBW{1'b0}});
    k1last  <= bl;
    k1row0  <= t0;
    k1t     <= tcnt;
    k1d     <= r0d;
end

// V input register
reg            v0v;
reg            v0first;
reg            v0row0;
reg            v0lastrow;
reg            v0bank;
reg  [RBW-1:0] v0b;
reg  [TW-1:0]  v0t;
reg  [8*BB-1:0] v0d;
always @(posedge aclk) begin
    v0v       <= aresetn && hs1 && s_v;
    v0first   <= (bcnt == {RBW{1'b0}});
    v0row0    <= t0;
    v0lastrow <= tl;
    v0bank    <= ib;
    v0b       <= bcnt;
    v0t       <= tcnt;
    v0d       <= r0d;
end

// K2 sideband (products below, per head and byte) and the tree's sideband delay line
reg            k2v;
reg            k2first;
reg            k2last;
reg            k2row0;
reg  [TW-1:0]  k2t;
always @(posedge aclk) begin
    k2v     <= aresetn && k1v;
    k2first <= k1first;
    k2last  <= k1last;
    k2row0  <= k1row0;
    k2t     <= k1t;
end
wire           k3v;
wire           k3first;
wire           k3last;
wire           k3row0;
wire [TW-1:0]  k3t;
delay_line #(.WIDTH(4 + TW), .CTRL_W(1), .DEPTH(K_TREE_REGS)) k3_dl (
    .clk(aclk), .rst_n(aresetn),
    .d({k2t, k2row0, k2last, k2first, k2v}),
    .q({k3t, k3row0, k3last, k3first, k3v})
);
// K4 sideband
reg            k4end;
reg            k4row0;
reg  [TW-1:0]  k4t;
always @(posedge aclk) begin
    k4end  <= aresetn && k3v && k3last;
    k4row0 <= k3row0;
    k4t    <= k3t;
end

// the elements of the K beat and of the delayed V beat (md, below), shared by every head
// (KV_BITS each: a byte, or two bytes little-endian)
wire signed [KV_BITS-1:0] kk [0:NE-1];
wire signed [KV_BITS-1:0] mvs [0:NE-1];
wire [8*BB-1:0]   md;
generate
for (j = 0; j < NE; j = j + 1) begin : byte_split
    assign kk[j]  = k1d[KV_BITS*j +: KV_BITS];
    assign mvs[j] = md[KV_BITS*j +: KV_BITS];
end
endgenerate

// ------------------------------------------------------------------ weight unit (shared)
// Row start -> score RAM read TRIG_DELAY cycles after the V input register (the K pipeline
// has written the last score and the maximum by then); the read is registered twice (BRAM
// read register and output register).
wire           trv;
wire           trb;
wire [TW-1:0]  trt;
delay_line #(.WIDTH(2 + TW), .CTRL_W(1), .DEPTH(TRIG_DELAY - 1)) trig_dl (
    .clk(aclk), .rst_n(aresetn), .d({v0bank, v0t, v0v && v0first}), .q({trb, trt, trv})
);

// per-head values the shared stages read (G small: flat vectors, head g at [g*width +: width])
wire [G*SB-1:0]   racc_all;   // row scores (K4), written to the score RAM
wire [G*SB-1:0]   m_all;      // running maxima
wire [G*16-1:0]   mu_all;     // MULT of the weight unit's frame
wire [G*6-1:0]    sh_all;     // SHIFT of the weight unit's frame
wire [G*48-1:0]   rnd_all;    // its rounding constant 2^SHIFT / 2

(* ram_style = "block" *) reg [G*SB-1:0] score_ram [0:LMAX-1];
always @(posedge aclk) begin
    if (k4end) begin
        score_ram[k4t] <= racc_all;
    end
end

reg  [G*SB-1:0] srd_a;    // BRAM read register
reg  [G*SB-1:0] srd;      // BRAM output register
reg            trv2, trv3;
reg            trb2, trb3;
// W0: every head's distance below its maximum, registered (e = m - score): the weight unit's
// head select then feeds the DSP48's A register from flip-flops, not from behind a carry chain
// (calibrated timing model: m -> subtract -> select -> A register 5.738 ns, docs/timing.md)
reg  [G*SB-1:0] ed;
integer ie;
always @(posedge aclk) begin
    if (trv) begin
        srd_a <= score_ram[trt];
    end
    srd  <= srd_a;
    trv2 <= aresetn && trv;
    trb2 <= trb;
    trv3 <= aresetn && trv2;
    trb3 <= trb2;
    for (ie = 0; ie < G; ie = ie + 1) begin
        ed[SB*ie +: SB] <= m_all[SB*ie +: SB] - srd[SB*ie +: SB];
    end
end

reg            wrun;
reg            wbank;
(* max_fanout = 24 *) reg [GW-1:0] wh;   // head of W1: selects every head's operands (C of a DSP48E1)
reg            w1v, w2v, w3v, w4v, w5v;
reg  [GW-1:0]  w1h, w2h, w3h, w4h, w5h;
reg  [SB-1:0]  e1;
reg  [15:0]    mu1;
reg  [5:0]     sh1, sh2;
reg  [47:0]    rnd1;      // (1 << SHIFT) >> 1
reg  [1:0]     sh3;
reg  [47:0]    lim2;      // EDEPTH << SHIFT (low 48 bits)
reg            big2;      // EDEPTH << SHIFT >= 2^48: no 48-bit product reaches past the table
reg            ov3, ov4, ov5;
(* use_dsp = "yes" *) reg [47:0] p2;
reg  [EAW+2:0] idx3;      // index, still to be shifted by sh3
wire [W-1:0]   pr5 = exp_q;   // table output (registered twice in the ROM)

// W2's inputs: W1's registers (EP_SPLIT = 0) or W2a's (EP_SPLIT = 1), and e * MULT + rnd
wire           w2i_v;
wire [GW-1:0]  w2i_h;
wire [5:0]     w2i_sh;
wire [47:0]    w2i_p;
generate
if (EP_SPLIT == 0) begin : ep_one
    // e * MULT at its natural width: SB x 16 bits unsigned, one DSP48E1 (W2)
    wire [SB+15:0] ep1 = e1 * mu1;
    /* verilator lint_off WIDTHEXPAND */
    wire [47:0]    ep1_48 = ep1;                      // zero-extended
    /* verilator lint_on WIDTHEXPAND */
    assign w2i_v  = w1v;
    assign w2i_h  = w1h;
    assign w2i_sh = sh1;
    assign w2i_p  = ep1_48 + rnd1;
end else begin : ep_two
    // e wider than a DSP48E1's A port (INT16 K): e = e_hi * 2^17 + e_lo. W2a: e_lo * MULT +
    // rnd (the first DSP48: A = e_lo, 17 bits, B = MULT, C = rnd; P register), e_hi and MULT
    // registered for the second; W2: e_hi * MULT + (the first sum >> 17) (the second DSP48,
    // the first's P through the cascade's 17-bit shift), the low 17 bits passed on
    reg            va;
    reg  [GW-1:0]  ha;
    reg  [5:0]     sha;
    reg  [15:0]    mua;
    reg  [EHW-1:0] ehi;
    (* use_dsp = "yes" *) reg [47:0] plo;
    wire [32:0]    eplo = e1[16:0] * mu1;
    /* verilator lint_off WIDTHEXPAND */
    wire [47:0]    eplo_48 = eplo;                    // zero-extended
    /* verilator lint_on WIDTHEXPAND */
    always @(posedge aclk) begin
        va  <= aresetn && w1v;
        ha  <= w1h;
        sha <= sh1;
        mua <= mu1;
        ehi <= e1[SB-1:17];
        plo <= eplo_48 + rnd1;
    end
    wire [EHW+15:0] ephi = ehi * mua;
    /* verilator lint_off WIDTHEXPAND */
    wire [30:0]    phi = ephi + plo[47:17];           // < 2^31: e * MULT + rnd < 2^48
    /* verilator lint_on WIDTHEXPAND */
    assign w2i_v  = va;
    assign w2i_h  = ha;
    assign w2i_sh = sha;
    assign w2i_p  = {phi, plo[16:0]};
end
endgenerate

// the shift by SHIFT in three 4-way steps, one LUT level each (kept apart): two in W3, the
// last in front of the table's address register in W4
(* keep *) wire [P1W-1:0] p2s1;
(* keep *) wire [EAW+2:0] p2s2;
/* verilator lint_off UNUSEDSIGNAL */
wire [47:0]    p2sh1 = p2 >> {sh2[5:4], 4'd0};
wire [P1W-1:0] p2sh2 = p2s1 >> {sh2[3:2], 2'd0};
wire [EAW+2:0] idx4  = idx3 >> sh3;
/* verilator lint_on UNUSEDSIGNAL */
assign p2s1 = p2sh1[P1W-1:0];
assign p2s2 = p2sh2[EAW+2:0];
assign exp_addr = idx4[EAW-1:0];

always @(posedge aclk) begin
    if (!aresetn) begin
        wrun <= 1'b0;
        wh   <= {GW{1'b0}};
        w1v  <= 1'b0;
        w2v  <= 1'b0;
        w3v  <= 1'b0;
        w4v  <= 1'b0;
        w5v  <= 1'b0;
    end else begin
        w1v <= wrun;
        w2v <= w2i_v;
        w3v <= w2v;
        w4v <= w3v;
        w5v <= w4v;
        if (wrun) begin
            wh <= wh + 1'b1;
            if (wh == G_M1) begin
                wrun <= 1'b0;
            end
        end
        if (trv3) begin
            wrun <= 1'b1;
            wh   <= {GW{1'b0}};
        end
    end
    if (trv3) begin
        wbank <= trb3;
    end
end

integer iw;
always @(posedge aclk) begin
    // W1: distance below the maximum (W0's, the head selected), this head's scale and
    // rounding constant (the row's frame bank; the constant registered, the DSP48's C
    // operand); head wh (head 0 for any other value)
    w1h <= wh;
    e1  <= ed[SB-1:0];
    mu1 <= mu_all[15:0];
    sh1 <= sh_all[5:0];
    rnd1 <= rnd_all[47:0];
    for (iw = 1; iw < G; iw = iw + 1) begin
        if (wh == iw[GW-1:0]) begin
            e1  <= ed[SB*iw +: SB];
            mu1 <= mu_all[16*iw +: 16];
            sh1 <= sh_all[6*iw +: 6];
            rnd1 <= rnd_all[48*iw +: 48];
        end
    end
    // W2: e * MULT + rounding constant (one DSP48, or the second of two: ep_two)
    w2h <= w2i_h;
    sh2 <= w2i_sh;
    p2  <= w2i_p;
    lim2 <= EDEPTH48 << w2i_sh;
    big2 <= (w2i_sh >= BIG_SH);
    // W3: shift, as three 4-way steps (one LUT level each, kept apart)
    w3h  <= w2h;
    idx3 <= p2s2;
    sh3  <= sh2[1:0];
    // past the table's end: (p >> SHIFT) >= EDEPTH, i.e. p >= EDEPTH << SHIFT
    ov3  <= !big2 && (p2 >= lim2);
    // W4: table read (block ROM read register); W5: ROM output register
    w4h <= w3h;
    ov4 <= ov3;
    w5h <= w4h;
    ov5 <= ov4;
    // W6: the head's weight for the next row (pn in hd[w5h])
end

// ------------------------------------------------------------------ V pipeline sideband
wire           mv;
wire           mfirst;
wire           mrow0;
wire           mlastrow;
wire           mbank;
wire [RBW-1:0] mb;
// ms0, ms1: a row's first beat of bank 0 / 1 (mv && mfirst && mbank == b), formed at the delay
// line's input and reset with mv: every head's S[b] enable is one flip-flop (make timing: from
// mfirst through two LUTs and nets of 74 and 105 loads, 5.58 ns calibrated, 5.90 ns basic)
wire           ms0, ms1;
delay_line #(.WIDTH(8 * BB + 7 + RBW), .CTRL_W(3), .DEPTH(V_DELAY)) v_dl (
    .clk(aclk), .rst_n(aresetn),
    .d({v0d, v0b, v0bank, v0lastrow, v0row0, v0first,
        v0v && v0first && v0bank, v0v && v0first && !v0bank, v0v}),
    .q({md, mb, mbank, mlastrow, mrow0, mfirst, ms1, ms0, mv})
);
// M0: the p*v operands registered (the DSP48's A and B registers: per head pa, below; the V
// bytes vb, shared by the heads); M1: product in the M register; M2: the accumulator read and
// added to it in the DSP48 (P = C + M), into its P register; M3: the sum written back
// (docs/timing.md: no fabric adder and no DSP48 output without its register on the way).
// A beat reads at M2 the address the beat ahead of it (at M3) writes at the end of the cycle:
// then it takes that beat's sum instead (m2fwd: rows of one beat, head_dim = beat bytes).
reg  signed [KV_BITS-1:0] vb [0:NE-1];
generate
for (j = 0; j < NE; j = j + 1) begin : vreg
    always @(posedge aclk) begin
        vb[j] <= mvs[j];
    end
end
endgenerate
reg            m1v;
reg            m1first;
reg            m1row0;
reg            m1lastrow;
reg            m1bank;
reg  [RBW-1:0] m1b;
reg            m2v;
reg            m2first;
reg            m2lastrow;
reg            m2bank;
reg            m3first;
reg            m3lastrow;
reg            m3bank;
// the accumulators' read and write addresses, write enable, row-0 and forward flags: each
// drives every lane's LUTRAM or C operand (1,000 to 2,000 pins); MAX_FANOUT has Vivado's
// synthesis replicate them, about one copy per lane (docs/timing.md counts them so)
(* max_fanout = 24 *) reg [RBA-1:0] m2a;
(* max_fanout = 48 *) reg            m2row0;
(* max_fanout = 48 *) reg            m2fwd;
(* max_fanout = 24 *) reg [RBA-1:0] m3a;
(* max_fanout = 24 *) reg            m3v;
always @(posedge aclk) begin
    m1v       <= aresetn && mv;
    m1first   <= mfirst;
    m1row0    <= mrow0;
    m1lastrow <= mlastrow;
    m1bank    <= mbank;
    m1b       <= mb;
    m2v       <= aresetn && m1v;
    m2a       <= {m1bank, m1b};
    m2row0    <= m1row0;
    m2first   <= m1first;
    m2lastrow <= m1lastrow;
    m2bank    <= m1bank;
    // next cycle the beat now at M1 is at M2 and the one now at M2 at M3, writing its sum
    m2fwd     <= m1v && m2v && (m2a == {m1bank, m1b});
    m3v       <= aresetn && m2v;
    m3a       <= m2a;
    m3first   <= m2first;
    m3lastrow <= m2lastrow;
    m3bank    <= m2bank;
end
// the finisher reads the other bank
// MAX_FANOUT here as on fbank and fb: yosys keeps only the name fa for fb's flip-flops (1,150
// loads each), so the attribute must be on this name too for the timing model to see the
// replication (issue 30 item 3: its data covers nets up to 258 loads; Vivado: UG901)
(* max_fanout = 24 *) wire [RBA-1:0] fa;
assign fa = {fbank, fb};
// M4: the order keys of the last row's sums registered (akr)
reg            m4v;
reg            m4first;
reg            m4bank;
always @(posedge aclk) begin
    m4v     <= aresetn && m3v && m3lastrow;
    m4first <= m3first;
    m4bank  <= m3bank;
end
// M5..M(MT+4): row maximum of |acc| on the last row (tree levels, per head below); then A
reg  [MT-1:0]  mtv;
reg  [MT-1:0]  mtfirst;
reg  [MT-1:0]  mtbank;
always @(posedge aclk) begin
    mtv     <= {mtv[MT-2:0], aresetn && m4v} & {MT{aresetn}};
    mtfirst <= {mtfirst[MT-2:0], m4first};
    mtbank  <= {mtbank[MT-2:0], m4bank};
end

// finisher: per-head values it reads
wire [AB-1:0]     yrd_h [0:4*G-1];   // head g, word k of the beat's quarter/half fh: [4g+k]
wire [AB-1:0]     af_h [0:G-1];      // A of the finisher's frame
wire [AZP-1:0]    azp_h [0:G-1];     // A != 0 in 6-bit pieces
wire [G*ZQ-1:0]   zq_all;            // Z quotients, head g at [ZQ*g +: ZQ]
wire [G-1:0]      zd_all;     // Z dividers done

// ------------------------------------------------------------------ per head
generate
for (g = 0; g < G; g = g + 1) begin : hd
    localparam integer   SOFF  = 8 + 4 * g;           // scale word: byte offset in the header
    localparam integer   SBEAT = SOFF / BB;           // its header beat
    localparam integer   SPOS  = SOFF % BB;           // its byte within the beat
    /* verilator lint_off WIDTHTRUNC */
    localparam [GW-1:0]  GI    = g;
    localparam [HBW-1:0] SBEAT_W = SBEAT;
    /* verilator lint_on WIDTHTRUNC */

    // -------------------------------------------------------------- header: scale word
    if (SBEAT == HB - 1) begin : fmt_last
        assign fmt_last_g[g] = r0slotbad[SPOS / 4];
        assign fmt_mid_g[g]  = 1'b0;
    end else begin : fmt_mid
        assign fmt_last_g[g] = 1'b0;
        assign fmt_mid_g[g]  = hs1 && s_hdr && (hcnt == SBEAT_W) && r0slotbad[SPOS / 4];
    end
    // captured from the header beat that carries it, in the frame's bank (the weight unit
    // may still read the previous frame's); the beat's word and the per-bank loads registered
    // first (sc_*), so the 100-odd enables are flip-flops, not three LUT levels behind hs1
    // (docs/timing.md); the q section comes after the header, so the cycle is free
    reg  [15:0] mult [0:1];
    reg  [5:0]  shift [0:1];
    reg  [47:0] rnd_b0, rnd_b1;   // the rounding constant 2^SHIFT / 2 per bank, decoded once
    reg         sc_ld0, sc_ld1;   // load bank 0 / bank 1 next cycle
    reg  [21:0] sc_d;             // {shift, mult} of the header beat
    always @(posedge aclk) begin
        sc_ld0 <= aresetn && hs1 && s_hdr && hcnt == SBEAT_W && !ib;
        sc_ld1 <= aresetn && hs1 && s_hdr && hcnt == SBEAT_W && ib;
        sc_d   <= r0d[8*SPOS +: 22];
    end
    always @(posedge aclk) begin  // per frame (flip-flops: decoded in front of their D pins)
        if (sc_ld0) begin
            mult[0]  <= sc_d[15:0];
            shift[0] <= sc_d[21:16];
            rnd_b0   <= (48'd1 << sc_d[21:16]) >> 1;
        end
        if (sc_ld1) begin
            mult[1]  <= sc_d[15:0];
            shift[1] <= sc_d[21:16];
            rnd_b1   <= (48'd1 << sc_d[21:16]) >> 1;
        end
    end
    assign mu_all[16*g +: 16] = mult[wbank];
    assign sh_all[6*g +: 6]   = shift[wbank];
    // the bank's constant as a kept net: W1's head select (into the DSP48's C register) is one
    // LUT after it, not mapped together with it into four LUT levels (docs/timing.md)
    (* keep *) wire [47:0] rnd_h;
    assign rnd_h = wbank ? rnd_b1 : rnd_b0;
    assign rnd_all[48*g +: 48] = rnd_h;

    // -------------------------------------------------------------- q, K pipeline
    // q: one LUTRAM of QRB beats; K1: the q elements of this K beat registered (the whole
    // q beat for INT8 K; for INT16 K, half of q beat bcnt >> 1, chosen by bcnt[0])
    reg  [8*BB-1:0] qh [0:QRB-1];
    reg  [8*NE-1:0] k1q;
    if (KVB == 1) begin : q8
        always @(posedge aclk) begin
            if (hs1 && s_q && qg == GI) begin
                qh[qb] <= r0d;
            end
            k1q <= qh[bcnt];
        end
    end else begin : q16
        wire [QRBW-1:0] qra;                // bcnt >> 1
        if (QRB > 1) begin : qa
            assign qra = bcnt[RBW-1:1];
        end else begin : qa1
            assign qra = 1'b0;
        end
        wire [8*BB-1:0] qrd = qh[qra];
        always @(posedge aclk) begin
            if (hs1 && s_q && qg == GI) begin
                qh[qb] <= r0d;
            end
            k1q <= bcnt[0] ? qrd[8*BB-1:8*NE] : qrd[8*NE-1:0];
        end
    end

    // K2: INT8 x KV_BITS products at their natural width (DSP), the leaves of the adder tree.
    // K3: the tree (pairwise, level l at KPW + l bits; registered at K_TREE_REG_LEVELS).
    // Node k of level l is entry 2 NE - 2 (NE >> l) + k of kte (even levels; the leaves are
    // level 0, entries 0 .. NE-1) or kto (odd levels): a level reads one array and writes the
    // other, so the unregistered levels never read and write one variable (Verilator would
    // have to iterate it: UNOPTFLAT).
    /* verilator lint_off UNUSEDSIGNAL */
    /* verilator lint_off UNDRIVEN */
    wire signed [PSB-1:0] kte [0:2*NE-2];
    wire signed [PSB-1:0] kto [0:2*NE-2];
    /* verilator lint_on UNDRIVEN */
    /* verilator lint_on UNUSEDSIGNAL */
    for (j = 0; j < NE; j = j + 1) begin : ln_k
        (* use_dsp = "yes" *) reg signed [KPW-1:0] kp;
        always @(posedge aclk) begin
            kp <= $signed(k1q[8*j +: 8]) * kk[j];
        end
        /* verilator lint_off WIDTHEXPAND */
        assign kte[j] = kp;                             // sign-extended
        /* verilator lint_on WIDTHEXPAND */
    end
    for (l = 1; l <= MT; l = l + 1) begin : ktl
        for (k = 0; k < (NE >> l); k = k + 1) begin : nd
            // children: entries 2 NE - 4 (NE >> l) + 2k and + 1 of the level below
            wire signed [KPW-1+l:0] s;
            wire signed [KPW-1+l:0] o;
            if (l % 2 == 1) begin : odd
                assign s = kte[2*NE-4*(NE>>l)+2*k][KPW-1+l:0]
                         + kte[2*NE-4*(NE>>l)+2*k+1][KPW-1+l:0];
                /* verilator lint_off WIDTHEXPAND */
                assign kto[2*NE-2*(NE>>l)+k] = o;       // sign-extended
                /* verilator lint_on WIDTHEXPAND */
            end else begin : even
                assign s = kto[2*NE-4*(NE>>l)+2*k][KPW-1+l:0]
                         + kto[2*NE-4*(NE>>l)+2*k+1][KPW-1+l:0];
                /* verilator lint_off WIDTHEXPAND */
                assign kte[2*NE-2*(NE>>l)+k] = o;
                /* verilator lint_on WIDTHEXPAND */
            end
            if (K_TREE_REG_LEVELS[l-1]) begin : r
                reg signed [KPW-1+l:0] q;
                always @(posedge aclk) begin
                    q <= s;
                end
                assign o = q;
            end else begin : c
                assign o = s;
            end
        end
    end
    wire signed [PSB-1:0] ks = (MT % 2 == 1) ? kto[2*NE-2] : kte[2*NE-2];   // partial score

    // K4: row accumulate; K5: score RAM write (racc_all, above) and running maximum
    reg  signed [SB-1:0] racc;
    reg  signed [SB-1:0] m;
    /* verilator lint_off WIDTHEXPAND */
    wire signed [SB-1:0] ks_x = ks;                     // sign-extended
    /* verilator lint_on WIDTHEXPAND */
    always @(posedge aclk) begin
        if (k3v) begin
            racc <= (k3first ? {SB{1'b0}} : racc) + ks_x;
        end
        if (k4end && (k4row0 || racc > m)) begin
            m <= racc;
        end
    end
    assign racc_all[SB*g +: SB] = racc;
    assign m_all[SB*g +: SB]    = m;

    // -------------------------------------------------------------- weight, p*v, S
    // W6: the weight of the next row (head g's turn in the weight unit)
    reg  [W-1:0]    pn;
    always @(posedge aclk) begin
        if (w5v && w5h == GI) begin
            pn <= ov5 ? {W{1'b0}} : pr5;
        end
    end
    // M0: the row's weight (pc), S per bank
    reg  [W-1:0]    pc;
    reg  [SWID-1:0] S [0:1];
    wire [W-1:0]    pu  = mfirst ? pn : pc;
    wire signed [W:0] pus = {1'b0, pu};
    /* verilator lint_off WIDTHEXPAND */
    wire [SWID-1:0] pn_x = pn;                          // zero-extended
    /* verilator lint_on WIDTHEXPAND */
    always @(posedge aclk) begin
        if (mv && mfirst) begin
            pc <= pn;
        end
        if (ms0) begin
            S[0] <= (mrow0 ? {SWID{1'b0}} : S[0]) + pn_x;
        end
        if (ms1) begin
            S[1] <= (mrow0 ? {SWID{1'b0}} : S[1]) + pn_x;
        end
    end

    // M0: the row's weight as the p*v products' A operand (registered); M1: p * v products
    // (DSP, W+1 x KV_BITS bits signed: the natural width; M register); M2: the accumulator (LUTRAM
    // per byte at m2a = {bank, beat in row}, zero on row 0) added to it in the DSP48, into its
    // P register; M3: written back; the sum's order key registered
    reg signed [W:0] pa;
    always @(posedge aclk) begin
        pa <= pus;
    end
    wire [AB-1:0] ak [0:NE-1];     // order key of |acc| without a negation:
                                   // {acc ^ sign, sign} = 2 |acc| - sign, registered (M4)
    wire [AB-1:0] accf [0:NE-1];   // the finisher's read at fa
    for (j = 0; j < NE; j = j + 1) begin : ln
        (* use_dsp = "yes" *) reg signed [MPW-1:0] mp1;
        (* use_dsp = "yes" *) reg [AB-1:0] sum;
        reg  [AB-1:0] acc [0:(1 << RBA)-1];
        reg  [AB-1:0] akr;
        /* verilator lint_off WIDTHEXPAND */
        wire signed [AB-1:0] mp_x = mp1;                // sign-extended
        /* verilator lint_on WIDTHEXPAND */
        wire [AB-1:0] cin = m2row0 ? {AB{1'b0}} : m2fwd ? sum : acc[m2a];
        always @(posedge aclk) begin
            mp1 <= pa * vb[j];
            sum <= cin + mp_x;
            if (m3v) begin
                acc[m3a] <= sum;
            end
            akr <= {sum[AB-2:0] ^ {(AB-1){sum[AB-1]}}, sum[AB-1]};
        end
        assign ak[j]   = akr;
        assign accf[j] = acc[fa];
    end

    // M5..: row maximum of the order keys, a registered tree of pairwise maxima (one
    // compare and select per level; level 1 compares by the borrow of one subtraction).
    // Node k of level l is mtn[NE - 2 (NE >> l) + k].
    wire [AB-1:0] mtn [0:NE-2];
    for (l = 1; l <= MT; l = l + 1) begin : mtl
        for (k = 0; k < (NE >> l); k = k + 1) begin : nd
            // left child: mtn[NE - 4 (NE >> l) + 2k] (level l - 1)
            reg [AB-1:0] q;
            if (l == 1) begin : first
                /* verilator lint_off UNUSEDSIGNAL */
                wire [AB:0] mtb = {1'b0, ak[2*k]} - {1'b0, ak[2*k+1]};
                /* verilator lint_on UNUSEDSIGNAL */
                always @(posedge aclk) begin
                    q <= mtb[AB] ? ak[2*k+1] : ak[2*k];
                end
            end else begin : next
                always @(posedge aclk) begin
                    q <= (mtn[NE-4*(NE>>l)+2*k+1] > mtn[NE-4*(NE>>l)+2*k])
                         ? mtn[NE-4*(NE>>l)+2*k+1] : mtn[NE-4*(NE>>l)+2*k];
                end
            end
            assign mtn[NE-2*(NE>>l)+k] = q;
        end
    end
    wire [AB-1:0] mx = mtn[NE-2];

    // A, the maximum over the last row's beats, kept as a key (Ak) and as the value
    // |acc| = (key >> 1) + (key & 1) (A, per bank)
    reg  [AB-1:0]   Ak;
    // A per bank (flip-flops), written a cycle after the compare mx > Ak (drain_base counts
    // the cycle): the write and its bank decode are registered, so the banks' clock enables
    // are flip-flops, not two LUT levels and two 45-load nets behind the compare's carry chain
    // (docs/timing.md)
    reg  [AB-1:0]   A0, A1;
    reg             a0_wr, a1_wr;       // write A0 / A1 with a_wd this cycle
    reg  [AB-1:0]   a_wd;
    wire [AB-1:0]   Af = fsel ? A1 : A0;   // the finisher's frame
    wire [SWID-1:0] Sf = S[fsel];
    reg  [AZP-1:0]  azp;                // Af != 0 in 6-bit pieces
    wire            a_new = mtv[MT-1] && (mtfirst[MT-1] || mx > Ak);
    always @(posedge aclk) begin
        if (a_new) begin
            Ak <= mx;
        end
        a0_wr <= aresetn && a_new && !mtbank[MT-1];
        a1_wr <= aresetn && a_new && mtbank[MT-1];
        a_wd  <= {1'b0, mx[AB-1:1]} + {{(AB-1){1'b0}}, mx[0]};
        if (a0_wr) A0 <= a_wd;
        if (a1_wr) A1 <= a_wd;
    end
    integer ia;
    always @(posedge aclk) begin
        for (ia = 0; ia < AZP; ia = ia + 1) begin
            azp[ia] <= |((Af >> (6 * ia)) & SIX1);
        end
    end
    assign af_h[g]  = Af;
    assign azp_h[g] = azp;

    // -------------------------------------------------------------- finisher reads
    // Y1: the 4 accumulators of the word (beat fb, word fh of the beat)
    for (k = 0; k < 4; k = k + 1) begin : yrd
        if (NE == 4) begin : whole
            assign yrd_h[4*g+k] = accf[k];
        end else if (NE == 8) begin : half
            assign yrd_h[4*g+k] = fh[0] ? accf[4+k] : accf[k];
        end else begin : quarter
            assign yrd_h[4*g+k] = fh[FHW-1] ? (fh[0] ? accf[12+k] : accf[8+k])
                                            : (fh[0] ? accf[4+k] : accf[k]);
        end
    end

    // Z = floor((A * 2^(F+1) + S) / (2 S)); the low F + 1 bits of the numerator are S's own,
    // so the addition is only as wide as A
    wire [ZN-1:0] zn;
    if (SWID > F + 1) begin : zwide
        // one adder per bank and the bank chosen after them: the bank select (every head's
        // A and S words, about 240 loads) is not in front of a 44-bit carry chain
        /* verilator lint_off WIDTHEXPAND */
        wire [ZN-F-2:0] a0_x = A0;                      // zero-extended
        wire [ZN-F-2:0] a1_x = A1;
        wire [ZN-F-2:0] s0_x = S[0][SWID-1:F+1];
        wire [ZN-F-2:0] s1_x = S[1][SWID-1:F+1];
        /* verilator lint_on WIDTHEXPAND */
        wire [ZN-F-2:0] znh0 = a0_x + s0_x;
        wire [ZN-F-2:0] znh1 = a1_x + s1_x;
        assign zn = fsel ? {znh1, S[1][F:0]} : {znh0, S[0][F:0]};
    end else begin : znarrow
        /* verilator lint_off WIDTHEXPAND */
        wire [ZN-F-2:0] af_x = Af;
        wire [F:0]      s_x  = Sf;
        /* verilator lint_on WIDTHEXPAND */
        assign zn = {af_x, s_x};
    end
    // registered: A and S of the finisher's frame are final from the cycle after `take`, and
    // zstart comes a cycle later still (ph_room); the divider loads a register, not an adder
    reg  [ZN-1:0] zn_r;
    always @(posedge aclk) begin
        zn_r <= zn;
    end
    attention_div_seq #(.NW(ZN), .DW(ZD), .QB(ZQ)) zdiv (
        .clk(aclk), .rst_n(aresetn), .start(zstart), .n(zn_r), .d({Sf, 1'b0}),
        .done(zd_all[g]), .q(zq_all[ZQ*g +: ZQ])
    );
end
endgenerate

// ------------------------------------------------------------------ finisher: results
// Y1: head fg's 4 accumulators (ysel, in yk[k]) and A, registered (head 0 for any other fg)
wire          y_issue = ph_y;
reg           y1v;
reg  [AB-1:0] yden;
reg  [AZP-1:0] yazp;
integer iy;
always @(posedge aclk) begin
    y1v  <= aresetn && y_issue;
    yden <= af_h[0];
    yazp <= azp_h[0];
    for (iy = 1; iy < G; iy = iy + 1) begin
        if (fgh[iy]) begin
            yden <= af_h[iy];
            yazp <= azp_h[iy];
        end
    end
end

reg           yr1v;
reg           yreg_v;
wire [31:0]   yword;
wire          yv;
/* verilator lint_off UNUSEDSIGNAL */
wire [3:0]    yvk;        // the 4 dividers run in lockstep: divider 0's valid is used
/* verilator lint_on UNUSEDSIGNAL */
wire          yv0 = yvk[0];
generate
for (k = 0; k < 4; k = k + 1) begin : yk
    // 254 |x| as one subtraction: 256 x - 2 x, operands swapped for a negative x (no
    // multiplier)
    reg  [AB-1:0] x;      // Y1: word k of head fg
    integer ih;
    always @(posedge aclk) begin
        x <= yrd_h[k];
        for (ih = 1; ih < G; ih = ih + 1) begin
            if (fgh[ih]) begin
                x <= yrd_h[4*ih+k];
            end
        end
    end
    wire          yneg  = x[AB-1];
    wire [AB+7:0] x256  = {x, 8'd0};
    wire [AB+7:0] x2    = {{7{yneg}}, x, 1'b0};
    wire [AB+7:0] ynum  = (yneg ? x2 : x256) - (yneg ? x256 : x2);
    wire [7:0]    yq;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [AB-1:0] yr;     // R itself is not needed: its 6-bit pieces' "!= 0" are (yrza, yrzr)
    /* verilator lint_on UNUSEDSIGNAL */
    wire [AZP-1:0] yrza, yrzr;
    wire          yrneg;
    wire [1:0]    ys;
    attention_div_pipe #(.NW(AB + 8), .DW(AB), .QB(8), .SW(2), .ZP(6)) ydiv (
        .clk(aclk), .rst_n(aresetn),
        .in_valid(y1v), .in_n(ynum), .in_d(yden), .in_side({yazp == {AZP{1'b0}}, yneg}),
        .out_valid(yvk[k]), .out_q(yq), .out_r(yr), .out_rza(yrza), .out_rzr(yrzr),
        .out_rneg(yrneg), .out_side(ys)
    );
    // y = RNE(Qt / 2) = h + rb with h = Qt >> 1 and rb = Qt odd and (R != 0 or h odd); with
    // the sign s: y = (h ^ s) + (rb ^ s) (two's complement). R is r + d when the divider's r
    // < 0, else r, so with q0 = Qt odd (0 when A = 0): rb = q0 & (q1 | (r >= 0 & r != 0)) |
    // q0 & r < 0 & (r + d != 0). R1: the terms of registers (yt_one, yt_a: r's pieces tested
    // in the divider, from registers) and the 6-bit pieces of r + d tested for zero, one LUT
    // after the divider's carry chain; h and s, cleared when A = 0 (so y = 0). R2: rb and the
    // 8-bit addition. (make timing: R != 0 chosen in R1, a LUT after the piece tests, 5.69 ns
    // calibrated; the choice made in R2, five LUT levels in front of the addition, 6.25 ns.)
    reg  [AZP-1:0] yrza_q;     // pieces of r + d that are nonzero
    reg           yt_one;     // rb whatever r + d: q0 & (q1 | (r >= 0 & r != 0))
    reg           yt_a;       // rb if r + d != 0: q0 & r < 0
    reg  [6:0]    yh;
    reg           ysn;
    reg  [7:0]    yb;
    wire          yq0w = yq[0] & ~ys[1];
    wire          yrb = yt_one | (yt_a & (yrza_q != {AZP{1'b0}}));
    always @(posedge aclk) begin
        yrza_q  <= yrza;
        yt_one  <= yq0w & (yq[1] | (!yrneg & (yrzr != {AZP{1'b0}})));
        yt_a    <= yq0w & yrneg;
        yh  <= ys[1] ? 7'd0 : yq[7:1];
        ysn <= ys[0] & ~ys[1];
        yb  <= ({1'b0, yh} ^ {8{ysn}}) + {7'd0, yrb ^ ysn};
    end
    assign yword[8*k +: 8] = yb;
end
endgenerate
always @(posedge aclk) begin
    yr1v   <= aresetn && yv0;
    yreg_v <= aresetn && yr1v;
end
assign yv = yreg_v;

always @(posedge aclk) begin
    if (!aresetn || zstart) begin
        ycnt  <= {NYW{1'b0}};
        ydone <= 1'b0;
    end else if (yv) begin
        ycnt <= ycnt + 1'b1;
        if (ycnt == NY_M1) begin
            ydone <= 1'b1;
        end
    end
end

// ------------------------------------------------------------------ finisher: scale words
assign zdone = &zd_all;
reg  [ZQ-1:0] zsel;       // head zg's Z (head 0 for any other zg)
integer iz;
always @(*) begin
    zsel = zq_all[ZQ-1:0];
    for (iz = 1; iz < G; iz = iz + 1) begin
        if (zg == iz[GW-1:0]) begin
            zsel = zq_all[ZQ*iz +: ZQ];
        end
    end
end
/* verilator lint_off WIDTHEXPAND */
wire [31:0] zsel32 = zsel;                                  // zero-extended
/* verilator lint_on WIDTHEXPAND */

// ------------------------------------------------------------------ output FIFO
wire        st_write = ph_stat;
wire        z_write  = ph_zout;
wire [31:0] status   = {(fres ? OUT_COUNT : 16'd0), 3'd0, fflags, ftag};
// the write is registered: the FIFO's write side sees register outputs only
reg         wr_en;
reg  [32:0] wr_data;
wire [32:0] rd_data;
always @(posedge aclk) begin
    wr_en   <= aresetn && (yv || z_write || st_write);
    wr_data <= yv ? {1'b0, yword}
             : z_write ? {1'b0, zsel32}
             : {1'b1, status};
end

sync_fifo #(.WIDTH(33), .ADDR_W(FIFO_ADDR_W), .MARGIN(FIFO_MARGIN)) out_fifo (
    .clk(aclk), .rst_n(aresetn), .port_rst_n(port_rst_n),
    .wr_en(wr_en), .wr_data(wr_data),
    .m_data(rd_data), .m_valid(m_axis_tvalid), .m_ready(m_axis_tready),
    .room(room)
);
assign m_axis_tdata = rd_data[31:0];
assign m_axis_tlast = rd_data[32];
assign m_axis_tkeep = 4'hF;

endmodule

`resetall
