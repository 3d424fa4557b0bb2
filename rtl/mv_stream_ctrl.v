// Stream controller shared by every matrix-vector engine (DESIGN.md section 3).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
//
// It parses the header, captures x from the stream into WPB banks (no AXI-Lite, no BRAM
// controller), sequences the rows with runtime K and N, and hands each row beat to the
// compute lane with x already read. It raises the error flags of the contract and sends an
// end-of-frame token down the pipeline, in a slot of its own, carrying the tag and flags the
// back end writes into the status word.
//
// Three register stages (CTRL_STAGES = 3 in generators/designs/mv_common.py; docs/timing.md):
//   stage 0  the input register: the beat, its tlast and "accepted" (tvalid && room); every
//            decision below is taken on it, so the port drives one flip-flop per bit
//   stage 1  the x read (the bank's read register; a block RAM's own read latch) and the
//            row beat's weights and sideband registered
//   stage 2  the x bank's output register (the block RAM's DOA_REG) and stage 1 registered:
//            the lane sees a block RAM's registered output (clock-to-out 0.89 ns, not 2.46 ns)
//
// Lane interface, all registered (stage 2):
//   lane_valid  a row beat: lane_w holds BYTES weight bytes, lane_x the BYTES*WPB x elements
//   lane_first  first beat of a row        lane_last   last beat of a row
//   lane_bmask  bit b: weight byte b holds at least one weight of index < K
//   lane_bzero  lane_bmask is all zero
//   lane_eof    end-of-frame token (never together with lane_valid); lane_status = {flags, tag}
// x past K reads as zero: the last x beat is masked and, for WPB > 1, the banks after it are
// zeroed at the same address, so no stale x of an earlier frame can leak into a row.
// s_axis_tready is the back end's registered `room` flag and nothing else.
//
// Two formats (FORMAT_B != 0): a frame whose header format byte is FORMAT_B is accepted too
// and sequenced with WPB_B weights per byte. One of WPB, WPB_B is 1, the other the bank count
// NBANKS; x is written the same way for both (beat j to bank j mod NBANKS, address
// j / NBANKS). A frame of NBANKS weights per byte reads every bank per row beat; a frame of one
// weight per byte reads one bank per row beat in turn, named by the one-hot lane_xsel that
// comes with lane_x. lane_fmt_b marks the beats of FORMAT_B frames.
//
// A third format (FORMAT_C != 0, the 4-bit lane next to the other two): WPB_C weights per
// byte, x written to banks 0 .. WPB_C-1 only (beat j to bank j mod WPB_C, address j / WPB_C),
// so one address of those banks holds a lane beat's x; lane_fmt_c marks its beats.
//
// Grouped rows (GROUP != 0; FORMAT_C frames, or FORMAT frames when there is no FORMAT_C): a
// row is a scale beat ahead of every GROUP code beats (the last group may be shorter). A scale
// beat holds no weights: it reads no x, counts no elements, and comes to the lane with an
// all-zero lane_bmask (a code beat always has a weight of index < K, so its mask is never zero).
//
// Per-block x scales (FORMAT_S != 0, docs/activations.md section 2; 8-byte beats, GROUP = 4):
// a frame whose format byte is FORMAT_S (0x05, Q4_1 rows with Q8_1 x) is sequenced as the
// grouped format (FORMAT_C when there is one, else FORMAT): its x codes go to the banks as
// that format's, and each vector's codes are followed by its x scale table, ceil(K/64) beats,
// beat g = {s(2g+1), d(2g+1), s(2g), d(2g)} (fp16), written to a scale store of its own per
// vector (ceil(MAX_K/64) words of 64 bits). A row's scale beat of group g reads word g of every
// vector's store (the x read address over 4: a group's scale beat comes after 4g code beats)
// and hands it to the lane as lane_xs, registered as lane_x is, with lane_xb marking the
// frame's beats. K not a multiple of 32 is BAD_SHAPE; a frame that ends in a scale table is
// SHORT. The store of a vector the frame does not carry reads as zero.
//
// Per-block x scales of one-weight-per-byte rows (FORMAT_SB != 0, docs/activations.md section 2;
// needs FORMAT_S, and FORMAT_B with WPB_B = 1): a frame whose format byte is FORMAT_SB (0x09,
// Q8_0 rows with Q8_0 x) is sequenced as FORMAT_B (x to the banks as its x, one bank read per
// row beat, lane_fmt_b set) in groups of 16 code beats (128 weights) behind a scale beat
// {d3, d2, d1, d0}, the last group only as long as its blocks; each vector's codes are followed
// by its x scale table, ceil(K/128) beats {d(4g+3), d(4g+2), d(4g+1), d(4g)}, written to the
// same scale store as FORMAT_S's. A row's scale beat of group g reads word g, counted by a group
// counter of its own (rgrp: the x read address of a one-bank-at-a-time row is not 16g). lane_xb
// marks both per-block formats' beats and lane_xb9 FORMAT_SB's. K not a multiple of 32 is
// BAD_SHAPE, as for FORMAT_S.
//
// Frames of B activation vectors (VECTORS > 1, docs/vectors.md; 8-byte beats): the header
// word's format byte with bit 7 set is followed by a vectors word (B in [7:0], [63:8] zero),
// then B vectors of x, each starting on a beat of its own. Vector v is written to bank set v
// (VECTORS copies of the NBANKS banks, one-hot xvoh), so one read address gives the lane the
// x of all VECTORS vectors at once: lane_x holds vector v in bits [v*XW +: XW]. lane_nv is the
// frame's B - 1, registered with every row beat, for the back end. With VECTORS = 1 none of
// this logic exists and a flagged format byte is BAD_FORMAT, as before.
//
// Depth: every decision is taken on registered flags. The header checks are registered on the
// header beat and acted on from the next beat (an x beat: st_x falls with it when hdr_bad, so
// after a bad header the frame drains to tlast; its first x beat is written to the banks,
// which every good frame overwrites before reading); "last x beat", "last beat of the
// row", "last row" and the byte masks are computed one beat ahead; the status flags are
// assembled from registered causes in the cycle after tlast.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module mv_stream_ctrl #
(
    // Bytes per input beat (4, 8 or 16)
    parameter BYTES = 8,
    // Weights per weight byte: 1 for INT8 rows, 5 for ternary rows
    parameter WPB = 1,
    // The row format this engine computes (header byte 6): 8'h08 INT8, 8'h03 ternary
    parameter FORMAT = 8'h08,
    // A second accepted format (8'h00: none)
    parameter FORMAT_B = 8'h00,
    // Weights per weight byte of FORMAT_B frames
    parameter WPB_B = 1,
    // Grouped rows: a scale beat ahead of every GROUP code beats (0: no scale beats)
    parameter GROUP = 0,
    // A third accepted format (8'h00: none), and its weights per byte (x in that many banks)
    parameter FORMAT_C = 8'h00,
    parameter WPB_C = 2,
    // x banks: the larger weights-per-byte of the accepted formats
    parameter NBANKS = (FORMAT_B != 8'h00 && WPB_B > WPB) ? WPB_B : WPB,
    // Largest K accepted
    parameter MAX_K = 512,
    // Input data width
    parameter DW = BYTES*8,
    // x elements per lane beat, in bits
    parameter XW = DW*NBANKS,
    // Header beats: the 8-byte header padded to whole beats
    parameter HDR_BEATS = (8 + BYTES - 1) / BYTES,
    // Words per x bank
    parameter X_DEPTH = (FORMAT_C != 8'h00 && WPB_C < NBANKS)
                      ? (MAX_K + BYTES*WPB_C - 1) / (BYTES*WPB_C)
                      : (MAX_K + BYTES*NBANKS - 1) / (BYTES*NBANKS),
    // Address width of the x banks
    parameter XA_W = (X_DEPTH <= 2) ? 1 : $clog2(X_DEPTH),
    // x store in block RAM (1) or distributed RAM (0)
    parameter X_BRAM = (MAX_K >= 256) ? 1 : 0,
    // Largest number of activation vectors a frame may carry (1: no vectors word accepted)
    parameter VECTORS = 1,
    // Bits of lane_nv (B - 1)
    parameter NVW = (VECTORS <= 2) ? 1 : $clog2(VECTORS),
    // Per-block x scales: the format byte of grouped rows with a scale table per vector
    // (8'h05: Q4_1 rows with Q8_1 x; 8'h00: none)
    parameter FORMAT_S = 8'h00,
    // Per-block x scales of FORMAT_B rows: the format byte of one-weight-per-byte rows in groups
    // of 16 code beats with a scale table per vector (8'h09: Q8_0 rows with Q8_0 x; 8'h00: none)
    parameter FORMAT_SB = 8'h00,
    // Words of each vector's x scale store (one per 64 x elements: FORMAT_S's table; FORMAT_SB's
    // takes one per 128)
    parameter XS_DEPTH = (MAX_K + 63) / 64,
    // Address width of the x scale store
    parameter XS_AW = (XS_DEPTH <= 2) ? 1 : $clog2(XS_DEPTH),
    // x scale store in block RAM (1) or distributed RAM (0)
    parameter XS_BRAM = (XS_DEPTH > 64) ? 1 : 0
)
(
    input  wire             aclk,
    input  wire             aresetn,

    input  wire [DW-1:0]    s_axis_tdata,
    input  wire             s_axis_tvalid,
    output wire             s_axis_tready,
    input  wire             s_axis_tlast,

    // back end has room for everything that can still be in flight
    input  wire             room,

    output reg              lane_valid,
    output reg              lane_first,
    output reg              lane_last,
    output reg              lane_eof,
    output reg  [DW-1:0]    lane_w,
    output wire [XW*VECTORS-1:0] lane_x,
    output reg  [BYTES-1:0] lane_bmask,
    // lane_bmask is all zero (a grouped row's scale beat when lane_valid): registered, so a lane
    // takes it from one flip-flop, not through a compare of lane_bmask
    output reg              lane_bzero,
    output reg  [15:0]      lane_status,
    // FORMAT_B frame (with lane_valid)
    output reg              lane_fmt_b,
    // one-hot bank of lane_x a one-weight-per-byte beat uses (all banks otherwise)
    output reg  [NBANKS-1:0] lane_xsel,
    // FORMAT_C frame (with lane_valid)
    output reg              lane_fmt_c,
    // the frame's number of vectors minus one (with lane_valid; 0 when VECTORS = 1)
    output reg  [NVW-1:0]   lane_nv,
    // FORMAT_S or FORMAT_SB frame (with lane_valid): x in blocks, a scale table per vector
    output reg              lane_xb,
    // FORMAT_SB frame (with lane_valid)
    output reg              lane_xb9,
    // FORMAT_S frames: with a scale beat of group g, word g of every vector's x scale table
    // (vector v in [64*v +: 64]); zero for a vector the frame does not carry
    output wire [64*VECTORS-1:0] lane_xs
);

localparam [15:0] MAGIC = 16'hB158;
localparam HAS_B = (FORMAT_B != 8'h00) ? 1 : 0;
localparam HAS_C = (FORMAT_C != 8'h00) ? 1 : 0;
localparam HAS_V = (VECTORS > 1) ? 1 : 0;
localparam HAS_S = (FORMAT_S != 8'h00) ? 1 : 0;
localparam HAS_SB = (FORMAT_SB != 8'h00) ? 1 : 0;
localparam LANE_ELEMS_C = BYTES * WPB_C;
localparam [16:0] ELEMS_C17 = LANE_ELEMS_C;
localparam [2:0] WRAP_A = NBANKS - 1;
localparam [2:0] WRAP_C = WPB_C - 1;
localparam LANE_ELEMS = BYTES * WPB;
localparam LANE_ELEMS_B = BYTES * WPB_B;
localparam [16:0] ELEMS_A17 = LANE_ELEMS;
localparam [16:0] ELEMS_B17 = LANE_ELEMS_B;
// every threshold (byte masks, row end) is at most two beats of the widest format: below 2^TW
localparam LE_MAX = (LANE_ELEMS_C > LANE_ELEMS ? (LANE_ELEMS_C > LANE_ELEMS_B ? LANE_ELEMS_C
                                                                              : LANE_ELEMS_B)
                                               : (LANE_ELEMS > LANE_ELEMS_B ? LANE_ELEMS
                                                                            : LANE_ELEMS_B));
localparam TW = $clog2(2 * LE_MAX + 1);


// flag bits of the status word
localparam [4:0] F_MAGIC = 5'b00001, F_SHAPE = 5'b00010, F_FORMAT = 5'b00100,
                 F_SHORT = 5'b01000, F_LONG = 5'b10000;
localparam [1:0] HDR_LAST = HDR_BEATS[1:0] - 2'd1;
// x bank 0: its one-hot select, and the banks after it
localparam [WPB-1:0] XOH0 = 1;
localparam [WPB-1:0] XLT0 = ~XOH0;

initial begin
    if (BYTES != 4 && BYTES != 8 && BYTES != 16) begin
        $display("mv_stream_ctrl: BYTES=%0d, must be 4, 8 or 16", BYTES);
        $finish;
    end
    if (WPB != 1 && WPB != 2 && WPB != 5) begin
        $display("mv_stream_ctrl: WPB=%0d, must be 1, 2 or 5", WPB);
        $finish;
    end
    if (HAS_B && !((WPB == 1 && WPB_B == NBANKS) || (WPB_B == 1 && WPB == NBANKS))
        || (HAS_B && FORMAT_B == FORMAT)) begin
        $display("mv_stream_ctrl: formats %0h (WPB %0d) and %0h (WPB %0d) cannot share the banks",
                 FORMAT, WPB, FORMAT_B, WPB_B);
        $finish;
    end
    if (HAS_C && (WPB_C < 1 || WPB_C > NBANKS || FORMAT_C == FORMAT || FORMAT_C == FORMAT_B
                  || GROUP == 0)) begin
        $display("mv_stream_ctrl: FORMAT_C %0h with WPB_C=%0d does not fit (and needs GROUP)",
                 FORMAT_C, WPB_C);
        $finish;
    end
    if (GROUP < 0 || GROUP > 7) begin
        $display("mv_stream_ctrl: GROUP=%0d out of range 0..7", GROUP);
        $finish;
    end
    if (TW > 15) begin
        $display("mv_stream_ctrl: beats of %0d elements are too wide for the row counter", LE_MAX);
        $finish;
    end
    if (VECTORS < 1 || VECTORS > 255 || (VECTORS > 1 && BYTES != 8)) begin
        $display("mv_stream_ctrl: VECTORS=%0d must be 1..255, and 1 unless BYTES=8", VECTORS);
        $finish;
    end
    if (HAS_S && (GROUP != 4 || BYTES != 8 || (HAS_C ? WPB_C : WPB) != 2
                  || FORMAT_S == FORMAT || FORMAT_S == FORMAT_B || FORMAT_S == FORMAT_C)) begin
        $display("mv_stream_ctrl: FORMAT_S %0h needs Q4_1 rows (GROUP 4, two weights per byte, 8-byte beats) and a code of its own",
                 FORMAT_S);
        $finish;
    end
    if (HAS_SB && (!HAS_S || !HAS_B || WPB_B != 1 || FORMAT_SB == FORMAT || FORMAT_SB == FORMAT_B
                   || FORMAT_SB == FORMAT_C || FORMAT_SB == FORMAT_S)) begin
        $display("mv_stream_ctrl: FORMAT_SB %0h needs FORMAT_S, one-weight-per-byte FORMAT_B rows and a code of its own",
                 FORMAT_SB);
        $finish;
    end
    if (XS_DEPTH < (MAX_K + 63) / 64 || XS_DEPTH > 1024 || (1 << XS_AW) < XS_DEPTH) begin
        $display("mv_stream_ctrl: XS_DEPTH=%0d (XS_AW=%0d) does not hold MAX_K=%0d", XS_DEPTH, XS_AW,
                 MAX_K);
        $finish;
    end
    if (MAX_K < 1 || MAX_K > 65535) begin
        $display("mv_stream_ctrl: MAX_K=%0d out of range 1..65535", MAX_K);
        $finish;
    end
end

// one-hot state: header, x, rows; none of them set = draining to tlast
reg         st_hdr, st_x, st_row;
reg         st_vw;               // the vectors word (VECTORS > 1)
reg         st_xs;               // an x scale table (FORMAT_S)
reg  [1:0]  hdr_cnt;
/* verilator lint_off UNUSEDSIGNAL */
reg  [63:0] hdr_buf;   // unused when one beat holds the whole header
/* verilator lint_on UNUSEDSIGNAL */
reg  [15:0] k_reg;
reg  [15:0] n_reg;
reg  [7:0]  tag_reg;
// header checks, registered on the header's last beat (1 = bad)
reg         chk_magic, chk_shape, chk_format;
// per-frame constants computed from the header
reg         k_one_beat;          // a row is one lane beat
reg         k_one_beat_b;        // the same for a FORMAT_B frame
reg  [BYTES-1:0] bmask_k_b;      // the same for a FORMAT_B frame
// per-frame thresholds (two or three formats; a one-format engine compares with constants)
/* verilator lint_off UNUSEDSIGNAL */
reg  [TW*BYTES-1:0] bthr_q;      // byte b of the next beat holds weights if rrem > bthr[b]
reg  [TW-1:0] rthr_q;            // the next beat ends the row if rrem <= rthr
reg  [TW*BYTES-1:0] hthr_q;      // grouped rows: thresholds of a code beat after a scale beat
reg  [TW-1:0] r1thr_q;           // grouped rows: the same for the row end
// three formats: each threshold plus the frame's elements per beat (rrem after a step is above
// a threshold if rrem before it is above this)
reg  [(TW+1)*BYTES-1:0] bthr_e_q, hthr_e_q;
reg  [TW:0] rthr_e_q, r1thr_e_q;
/* verilator lint_on UNUSEDSIGNAL */
reg         n_one;               // one row
reg  [BYTES-1:0] bmask_k;        // byte mask of a row's first beat
// x capture
reg  [16:0] xrem;                // x elements still to come, before this beat
reg         x_last_q;            // the next x beat is the last
reg  [BYTES-1:0] xmask_q;        // bytes of the next x beat that hold x (index < K)
reg  [XA_W-1:0] xaddr;
reg  [2:0]  xbank;
reg  [WPB-1:0] xoh;              // xbank one-hot: bank g takes this x beat
reg  [WPB-1:0] xlt;              // bit g: xbank < g (bank g lies after this beat's bank)
// vectors (VECTORS > 1): the vector being captured, one-hot, and whether it is the frame's last
reg  [VECTORS-1:0] xvoh;
reg         xv_last_q;
wire        x_vlast = !HAS_V || xv_last_q;   // the x beats are the frame's last vector's
reg  [7:0]  xvrem;               // vectors after the current one
reg  [16:0] xadv;                // K padded to whole beats, less one beat: xrem's step at a
                                 // vector's last beat, back to K for the next vector
reg  [NVW-1:0] nv_reg;           // B - 1
reg         kx_last0;            // K fits one beat: a vector is one x beat
reg  [BYTES-1:0] xmask0;         // bytes of a vector's first x beat that hold x
// rows
(* max_fanout = 12 *) reg [16:0] rrem;   // row elements not yet covered, before this beat
                                 // (its compares: 28 loads, copies of 12 at most)
reg         rrem_hi;             // rrem >= 2^TW (above every threshold: the compares below
                                 // take rrem's TW low bits and this flag, docs/timing.md)
reg         row_first_q;         // the next row beat starts a row
reg         row_last_q;          // the next row beat ends its row
reg  [BYTES-1:0] bmask_q;        // byte mask of the next row beat
reg  [15:0] rows_left;           // rows after the current one
reg         last_row_q;          // the current row is the frame's last
reg  [XA_W-1:0] raddr;
reg  [NBANKS-1:0] rsel;          // one-hot read bank of a one-weight-per-byte frame
reg         fmt_b;               // the frame is FORMAT_B
reg         fmt_c;               // the frame is FORMAT_C (or FORMAT_S, sequenced as FORMAT_C)
reg         fmt_s;               // the frame is FORMAT_S or FORMAT_SB: scale tables after the
                                 // x codes
reg         fmt_sb;              // the frame is FORMAT_SB (sequenced as FORMAT_B, groups of 16)
// x scale tables (FORMAT_S)
reg  [9:0]  xs_n1;               // beats of a table less one: ceil(K/64) - 1
reg  [9:0]  xs_left;             // beats of the current table after this one
reg         xs_last_q;           // the next scale table beat is its table's last
reg         xs_one;              // a table is one beat (K <= 64)
reg  [XS_AW-1:0] xs_addr;        // the word this table beat is written to
reg  [VECTORS-1:0] xs_voh;       // the vector whose table is being written, one-hot
reg         xs_vl;               // that vector is the frame's last
/* verilator lint_off UNUSEDSIGNAL */
reg  [VECTORS-1:0] xv_use;       // bit v: the frame carries vector v (unused without FORMAT_S)
/* verilator lint_on UNUSEDSIGNAL */
reg  [2:0]  xwrap;               // the frame's last x bank
// grouped rows (GROUP != 0)
reg         grp_f;               // the frame's rows have scale beats
reg         scale_q;             // the next row beat is a scale beat
reg  [3:0]  gcnt;                // code beats of the current group before this beat
localparam HAS_G = (GROUP != 0) ? 1 : 0;
localparam [3:0] GROUP_LAST = (GROUP != 0) ? {1'b0, GROUP[2:0]} - 4'd1 : 4'd0;
// this code beat ends its group (a FORMAT_SB frame's groups are 16 code beats)
wire        grp_end = (HAS_SB && fmt_sb) ? (gcnt == 4'd15) : (gcnt == GROUP_LAST);
// stage 1: the row beat's weights and sideband (registered again into the lane_* ports)
reg              s1_valid, s1_first, s1_last, s1_eof, s1_fmt_b, s1_fmt_c, s1_xb, s1_xb9;
reg  [DW-1:0]    s1_w;
reg  [BYTES-1:0] s1_bmask;
reg              s1_bzero;
reg  [15:0]      s1_status;
reg  [NBANKS-1:0] s1_xsel;
// end of frame, registered causes
reg         eof_d;
reg         e_partial_hdr, e_hdr_now, e_row_ok, e_in_x, e_in_row;
reg  [NVW-1:0] s1_nv;

assign s_axis_tready = room;

// ---------------------------------------------------------------- stage 0: input register
reg            in_v;               // a beat was accepted (tvalid && room) in the cycle before
reg            in_vx;              // copies of in_v for the x write and for rrem alone (small
reg            in_vr;              // fanouts; all kept, or synthesis merges them)
reg            in_vv;              // and for the one-hot vector xvoh alone
reg  [DW-1:0]  in_d;
reg            in_l;
always @(posedge aclk) begin
    in_d <= s_axis_tdata;
    in_l <= s_axis_tlast;
end
(* keep *)
always @(posedge aclk) begin
    in_v  <= aresetn && s_axis_tvalid && room;
    in_vx <= aresetn && s_axis_tvalid && room;
    in_vr <= aresetn && s_axis_tvalid && room;
    in_vv <= aresetn && s_axis_tvalid && room;
end
wire accept = in_v;

// ---------------------------------------------------------------- header decode
wire [63:0] hdr_word;
generate
if (DW >= 64) begin : g_hdr_wide
    assign hdr_word = in_d[63:0];
end else begin : g_hdr_narrow
    // beats arrive low word first; the final beat completes the header
    assign hdr_word = {in_d, hdr_buf[63:DW]};
end
endgenerate

wire        hdr_done  = (HDR_BEATS == 1) || (hdr_cnt == HDR_LAST);   // a constant for one beat
// the header's last beat is taken: every per-frame register loads (about 120 loads), one LUT
// from registers, kept (ABC otherwise built it as a chain of LUT2s shared with other enables)
(* keep *) wire hdr_load;
assign hdr_load = accept && st_hdr && hdr_done;
// the vector registers (xvoh, xv_last_q, xvrem) change on the header's last beat, the vectors
// word and a vector's last x beat: which one is a decision of registers (kept nets), so their
// enables are one LUT from the input register's valid (in_v), not a chain behind it
// (one-hot states: with xv_en, st_hdr means the header's last beat, and neither st_hdr nor st_vw
// a vector's last x beat with another vector to come)
(* keep *) wire xv_en;
assign xv_en = (st_hdr && hdr_done) || st_vw || (st_x && x_last_q && !xv_last_q);
// the one-hot vector xvoh: set to vector 0 by the header's last beat, shifted by a vector's last
// x beat with another to come; each a kept net of registers, so xvoh's set and enable are one
// LUT each, from a copy of the input register's valid of their own (in_vv) (make timing: through
// xv_en and the reset ABC put four LUT levels from x_last_q to xvoh[0], 5.777 ns calibrated in
// the top with format 0x09; from in_v itself it shared their terms with the controller's other
// enables: in_v -> xv_last_q 6.56 ns)
(* keep *) wire xv_first;
(* keep *) wire xv_next;
assign xv_first = in_vv && st_hdr && hdr_done;
assign xv_next  = in_vv && st_x && x_last_q && !xv_last_q;
wire [15:0] h_k       = hdr_word[31:16];
wire [15:0] h_n       = hdr_word[47:32];
/* verilator lint_off UNUSEDSIGNAL */
wire [15:0] h_k_m1;                                 // K - 1: bits [15:6] are ceil(K/64) - 1,
                                                    // [15:7] ceil(K/128) - 1 (g_hpre, g_hcomb)
/* verilator lint_on UNUSEDSIGNAL */

// the format byte's code: bit 7 is the vectors flag when VECTORS > 1 (else part of the code, so
// a flagged frame matches no format and is BAD_FORMAT). Its tests against each format's code
// (h_is_*) are registered at stage 0 with a one-beat header, as K's (g_hpre: made from in_d,
// the per-format choices of the per-frame registers were four to six LUT levels behind them,
// make timing: h_code -> chk_shape 6.10 ns calibrated with format 0x09's code among them)
wire        h_vflag   = HAS_V && hdr_word[55];
/* verilator lint_off UNUSEDSIGNAL */
wire [7:0]  h_code    = HAS_V ? {1'b0, hdr_word[54:48]} : hdr_word[55:48];   // g_hcomb's
/* verilator lint_on UNUSEDSIGNAL */
wire        h_is_a, h_is_b, h_is_c, h_is_s, h_is_sb;     // the code is FORMAT, FORMAT_B, ...
wire        h_fmt_sb  = HAS_SB && h_is_sb;
wire        h_fmt_b   = HAS_B && (h_is_b || h_fmt_sb);
wire        h_fmt_s   = HAS_S && h_is_s;
wire        h_fmt_c   = HAS_C && (h_is_c || h_fmt_s);
// the frame's rows are grouped (scale beats)
wire        h_grp     = HAS_G && ((HAS_C ? h_fmt_c : !h_fmt_b) || h_fmt_sb);
// Two or three formats: every per-format figure is computed for each format and registered, or
// held in a per-frame register, so no compare's operand is chosen by a mux in front of its
// carry chain (synthesis merges exclusive compares into one compare of a muxed operand).
// The header's tests of K, N and the magic. K is compared with the small constants of the
// per-frame masks (kconst: byte b holds a weight, K > b * WPB, for each format; byte b holds x,
// K > b; K = 0; a row or x fits one beat). With a one-beat header (DW >= 64) every test is made
// on the AXI word as it enters the input register, each a register of its own beside in_d
// (stage 0): the header beat's decisions then start from one flip-flop per test. Made from
// in_d instead, ABC built the compares as chains of up to six LUTs sharing terms in front of
// the per-frame registers (6.1 to 6.4 ns at vectors 2: docs/vectors.md, "The PYNQ-Z1
// default"). A two-beat header (DW = 32) takes K from hdr_buf and tests it in stage 1.
localparam NKC = 3 * BYTES + 4;
function integer kconst;
    input integer i;
    begin
        if (i < BYTES)               kconst = i * WPB;
        else if (i < 2 * BYTES)      kconst = (i - BYTES) * WPB_B;
        else if (i < 3 * BYTES)      kconst = i - 2 * BYTES;
        else if (i == 3 * BYTES)     kconst = 0;
        else if (i == 3 * BYTES + 1) kconst = LANE_ELEMS;
        else if (i == 3 * BYTES + 2) kconst = LANE_ELEMS_B;
        else                         kconst = BYTES;
    end
endfunction
function [NKC-1:0] k_tests;      // bit i: k > kconst(i)
    input [15:0] k;
    integer i;
    begin
        for (i = 0; i < NKC; i = i + 1) begin
            k_tests[i] = ({16'd0, k} > kconst(i));
        end
    end
endfunction
wire [NKC-1:0] kgt;              // bit i: K > kconst(i)
wire           h_magic_ok;
wire           h_n_zero;
wire           h_k_big;
wire           h_k_odd;          // K is not a multiple of 32
// the vectors word's tests (VECTORS > 1): B = 0 or B > VECTORS; a bit set in [63:8]
wire           vw_nb_bad;
wire           vw_hi_nz;
generate
if (DW >= 64) begin : g_hpre
    reg [NKC-1:0] kgt_r;
    reg           kbig, magic_ok, nzero, kodd, nb_bad;
    reg  [9:0]    hi_nz;         // bit i: a bit set in [8+6i +: 6] of the word (the last: 2 bits)
    reg  [15:0]   km1;
    reg           is_a, is_b, is_c, is_s, is_sb;
    wire [7:0]    code_in = HAS_V ? {1'b0, s_axis_tdata[54:48]} : s_axis_tdata[55:48];
    integer       p;
    always @(posedge aclk) begin
        kgt_r    <= k_tests(s_axis_tdata[31:16]);
        km1      <= s_axis_tdata[31:16] - 16'd1;
        is_a     <= (code_in == FORMAT);
        is_b     <= (code_in == FORMAT_B);
        is_c     <= (code_in == FORMAT_C);
        is_s     <= (code_in == FORMAT_S);
        is_sb    <= (code_in == FORMAT_SB);
        kbig     <= (MAX_K < 65535) && (s_axis_tdata[31:16] > MAX_K);
        magic_ok <= (s_axis_tdata[15:0] == MAGIC);
        nzero    <= (s_axis_tdata[47:32] == 16'd0);
        kodd     <= (s_axis_tdata[20:16] != 5'd0);
        // the vectors word's tests as the header's (make timing: the 56-bit test of [63:8]
        // made from in_d was five LUT levels and a carry in front of chk_format, 5.77 ns; as
        // one register, five LUT2 levels from the port's register, 5.61 ns): [63:8] in 6-bit
        // pieces, one LUT each, ORed where the flag is used
        nb_bad   <= (s_axis_tdata[7:0] == 8'd0) || (s_axis_tdata[7:0] > VECTORS);
        for (p = 0; p < 10; p = p + 1) begin
            hi_nz[p] <= |((s_axis_tdata[63:8] >> (6 * p)) & 56'h3f);
        end
    end
    assign kgt        = kgt_r;
    assign h_k_m1     = km1;
    assign {h_is_a, h_is_b, h_is_c, h_is_s, h_is_sb} = {is_a, is_b, is_c, is_s, is_sb};
    assign h_k_big    = kbig;
    assign h_magic_ok = magic_ok;
    assign h_n_zero   = nzero;
    assign h_k_odd    = kodd;
    assign vw_nb_bad  = nb_bad;
    assign vw_hi_nz   = |hi_nz;
end else begin : g_hcomb
    assign kgt        = k_tests(h_k);
    assign h_k_m1     = h_k - 16'd1;
    assign h_is_a     = (h_code == FORMAT);
    assign h_is_b     = (h_code == FORMAT_B);
    assign h_is_c     = (h_code == FORMAT_C);
    assign h_is_s     = (h_code == FORMAT_S);
    assign h_is_sb    = (h_code == FORMAT_SB);
    assign h_k_big    = (MAX_K < 65535) && (h_k > MAX_K);
    assign h_magic_ok = (hdr_word[15:0] == MAGIC);
    assign h_n_zero   = (h_n == 16'd0);
    assign h_k_odd    = (h_k[4:0] != 5'd0);
    assign vw_nb_bad  = (in_d[7:0] == 8'd0) || (in_d[7:0] > VECTORS);
    assign vw_hi_nz   = (hdr_word[63:8] != 56'd0);
end
endgenerate
wire [BYTES-1:0] h_bmask   = kgt[BYTES-1:0];               // byte b holds a weight: K > b * WPB
wire [BYTES-1:0] h_bmask_b = kgt[2*BYTES-1:BYTES];         // the same, FORMAT_B
wire [BYTES-1:0] h_xmask   = kgt[3*BYTES-1:2*BYTES];       // byte b holds x: K > b
wire             h_k_zero  = !kgt[3*BYTES];
wire             h_k_le_a  = !kgt[3*BYTES+1];              // K <= LANE_ELEMS: a row is one beat
wire             h_k_le_b  = !kgt[3*BYTES+2];              // K <= LANE_ELEMS_B
wire             h_k_le_x  = !kgt[3*BYTES+3];              // K <= BYTES: x is one beat
reg  [TW*BYTES-1:0] h_bthr;
reg  [TW*BYTES-1:0] h_hthr;
// the same plus the frame's elements per beat (three formats: the compares one step ahead)
/* verilator lint_off UNUSEDSIGNAL */
reg  [(TW+1)*BYTES-1:0] h_bthr_e;
reg  [(TW+1)*BYTES-1:0] h_hthr_e;
reg  [TW:0] h_rthr_e, h_r1thr_e;
/* verilator lint_on UNUSEDSIGNAL */
integer b;
/* verilator lint_off UNUSEDSIGNAL */
integer thr;   // bits [TW-1:0] used: every threshold is below 2^TW
/* verilator lint_on UNUSEDSIGNAL */
// The "_e" thresholds (each plus the frame's elements per beat) are constants per format, each
// chosen whole: written as one chosen threshold plus one chosen element count, they were an
// adder of two chosen constants, whose carry chain ABC kept (make timing: 6.30 ns in the matrix
// engine at vectors 2, h_fmt_s -> r1thr_e_q, docs/timing.md).
always @* begin
    for (b = 0; b < BYTES; b = b + 1) begin
        thr = h_fmt_c ? b * WPB_C + LANE_ELEMS_C : h_fmt_b ? b * WPB_B + LANE_ELEMS_B
            : b * WPB + LANE_ELEMS;
        h_bthr[TW*b +: TW] = thr[TW-1:0];
        if (h_fmt_c)      thr = b * WPB_C + 2 * LANE_ELEMS_C;
        else if (h_fmt_b) thr = b * WPB_B + 2 * LANE_ELEMS_B;
        else              thr = b * WPB + 2 * LANE_ELEMS;
        h_bthr_e[(TW+1)*b +: TW+1] = thr[TW:0];
        thr = h_fmt_c ? b * WPB_C : h_fmt_sb ? b * WPB_B : b * WPB;
        h_hthr[TW*b +: TW] = thr[TW-1:0];
        if (h_fmt_c)                  thr = b * WPB_C + LANE_ELEMS_C;
        else if (h_fmt_sb && h_fmt_b) thr = b * WPB_B + LANE_ELEMS_B;
        else if (h_fmt_sb)            thr = b * WPB_B + LANE_ELEMS;
        else if (h_fmt_b)             thr = b * WPB + LANE_ELEMS_B;
        else                          thr = b * WPB + LANE_ELEMS;
        h_hthr_e[(TW+1)*b +: TW+1] = thr[TW:0];
    end
    if (h_fmt_c)      thr = 3 * LANE_ELEMS_C;
    else if (h_fmt_b) thr = 3 * LANE_ELEMS_B;
    else              thr = 3 * LANE_ELEMS;
    h_rthr_e = thr[TW:0];
    if (h_fmt_c)                  thr = 2 * LANE_ELEMS_C;
    else if (h_fmt_sb && h_fmt_b) thr = 2 * LANE_ELEMS_B;
    else if (h_fmt_sb)            thr = LANE_ELEMS_B + LANE_ELEMS;
    else if (h_fmt_b)             thr = LANE_ELEMS + LANE_ELEMS_B;
    else                          thr = 2 * LANE_ELEMS;
    h_r1thr_e = thr[TW:0];
end
localparam [TW-1:0] RTHR_A = 2 * LANE_ELEMS;
localparam [TW-1:0] RTHR_B = 2 * LANE_ELEMS_B;
localparam [TW-1:0] RTHR_C = 2 * LANE_ELEMS_C;
// after a scale beat (grouped rows): the next code beat ends the row if rrem <= one beat
localparam [TW-1:0] R1THR_A = LANE_ELEMS;
localparam [TW-1:0] R1THR_B = LANE_ELEMS_B;
localparam [TW-1:0] R1THR_C = LANE_ELEMS_C;

// flags of the header, from the registered checks (valid from the beat after the header)
// (the vectors word's checks are ORed into chk_shape and chk_format on its beat)
wire        hdr_bad   = chk_magic || chk_shape || chk_format;
wire [4:0]  hdr_flags = chk_magic ? F_MAGIC
                      : ((chk_shape ? F_SHAPE : 5'd0) | (chk_format ? F_FORMAT : 5'd0));

// ---------------------------------------------------------------- x capture
reg  [DW-1:0] x_masked;
always @* begin
    for (b = 0; b < BYTES; b = b + 1) begin
        x_masked[8*b +: 8] = xmask_q[b] ? in_d[8*b +: 8] : 8'd0;
    end
end

// the x write of this beat, from two registers (kept: it is not merged into the controller's
// other enables, whose fanout is large); each bank adds its one-hot selects, one LUT in all.
// Not gated by the header's checks: after a bad header (or vectors word) the frame's first x
// beat is written before st_x falls and the frame drains; harmless, since every good frame
// writes each x position its rows read before its first row. (Gated by hdr_bad, the write
// enable was four LUT levels from chk_shape to the BRAMs' WE, 6.1 ns at vectors 2.)
(* keep *) wire x_wr;
assign x_wr = in_vx && st_x;
// the last x beat of a vector: the x position restarts (VECTORS > 1), one LUT from registers
// (kept apart like x_wr; a constant 0 when VECTORS = 1)
wire x_clr;
generate
if (HAS_V) begin : g_xclr
    (* keep *) wire clr;
    assign clr = in_vx && st_x && x_last_q;
    assign x_clr = clr;
end else begin : g_xclr1
    assign x_clr = 1'b0;
end
endgenerate
wire [XA_W-1:0] rd_addr = raddr;

genvar g, gv;

// ---------------------------------------------------------------- x scale store (FORMAT_S)
// xv_use_of(B): bit v set for the B vectors a frame carries
function [VECTORS-1:0] xv_use_of(input [7:0] nb);
    integer i;
    begin
        for (i = 0; i < VECTORS; i = i + 1) begin
            xv_use_of[i] = (i < nb);
        end
    end
endfunction
// the row's group: the x read address over 4 (a scale beat of group g follows 4g code beats);
// with FORMAT_SB a counter of the row's scale beats (rgrp), for both per-block formats
/* verilator lint_off UNUSEDSIGNAL */
wire [XS_AW-1:0] xs_raddr;          // unused without FORMAT_S
/* verilator lint_on UNUSEDSIGNAL */
generate
if (HAS_SB) begin : g_rgrp
    // cleared by every x beat and a row's last beat, stepped by a scale beat: its enables one
    // LUT each from the input register, kept apart (as rrem's)
    (* keep *) wire rg_clr;
    (* keep *) wire rg_step;
    assign rg_clr  = in_vr && (st_x || (st_row && row_last_q));
    assign rg_step = in_vr && st_row && scale_q && !row_last_q;
    reg  [XS_AW-1:0] rgrp;          // the row's groups before this beat
    always @(posedge aclk) begin    // no reset: cleared by every x beat before a row reads it
        if (rg_clr) begin
            rgrp <= {XS_AW{1'b0}};
        end else if (rg_step) begin
            rgrp <= rgrp + 1'b1;
        end
    end
    assign xs_raddr = rgrp;
end else begin : g_raddr4
    /* verilator lint_off UNUSEDSIGNAL */
    wire [XA_W+XS_AW+1:0] raddr_w = {{(XS_AW+2){1'b0}}, raddr};
    /* verilator lint_on UNUSEDSIGNAL */
    assign xs_raddr = raddr_w[XS_AW+1:2];
end
endgenerate
generate
if (HAS_S) begin : g_xs
    // the table beat's write, from two registers (kept, as x_wr)
    (* keep *) wire xs_wr;
    assign xs_wr = in_vx && st_xs;
    for (gv = 0; gv < VECTORS; gv = gv + 1) begin : g_vec
        reg [63:0] xs_q;            // stage 1: the read register
        reg [63:0] xs_q2;           // stage 2: the output register
        if (XS_BRAM) begin : g_bram
            (* ram_style = "block" *) reg [63:0] store [0:XS_DEPTH-1];
            always @(posedge aclk) begin
                if (xs_wr && xs_voh[gv]) begin
                    store[xs_addr] <= in_d;
                end
                xs_q  <= store[xs_raddr];
                xs_q2 <= xv_use[gv] ? xs_q : 64'd0;
            end
        end else begin : g_lutram
            (* ram_style = "distributed" *) reg [63:0] store [0:XS_DEPTH-1];
            always @(posedge aclk) begin
                if (xs_wr && xs_voh[gv]) begin
                    store[xs_addr] <= in_d;
                end
                xs_q  <= store[xs_raddr];
                xs_q2 <= xv_use[gv] ? xs_q : 64'd0;
            end
        end
        assign lane_xs[64*gv +: 64] = xs_q2;
    end
end else begin : g_noxs
    assign lane_xs = {64*VECTORS{1'b0}};
end
endgenerate

generate
for (gv = 0; gv < VECTORS; gv = gv + 1) begin : g_vec
for (g = 0; g < WPB; g = g + 1) begin : g_bank
    reg [DW-1:0] bank_q;            // stage 1: the read register
    reg [DW-1:0] bank_q2;           // stage 2: the output register
    // this bank is written with the beat, or zeroed when it lies after the last x beat: the
    // bank's choice a kept net of registers (wsel), so the write enable is one LUT after x_wr
    // (make timing: ABC built it as three LUT2 levels from st_x to the block RAMs' WE, 5.72 ns
    // calibrated)
    (* keep *) wire wsel;
    wire wr_this;
    if (HAS_V) begin : g_wv
        assign wsel = xvoh[gv] && (xoh[g] || (x_last_q && xlt[g]));
    end else begin : g_w1
        assign wsel = xoh[g] || (x_last_q && xlt[g]);
    end
    assign wr_this = x_wr && wsel;
    if (X_BRAM) begin : g_bram
        (* ram_style = "block" *) reg [DW-1:0] bank [0:X_DEPTH-1];
        always @(posedge aclk) begin
            if (wr_this) begin
                bank[xaddr] <= xoh[g] ? x_masked : {DW{1'b0}};
            end
            bank_q <= bank[rd_addr];
            bank_q2 <= bank_q;
        end
    end else begin : g_lutram
        (* ram_style = "distributed" *) reg [DW-1:0] bank [0:X_DEPTH-1];
        always @(posedge aclk) begin
            if (wr_this) begin
                bank[xaddr] <= xoh[g] ? x_masked : {DW{1'b0}};
            end
            bank_q <= bank[rd_addr];
            bank_q2 <= bank_q;
        end
    end
    assign lane_x[gv*XW + g*DW +: DW] = bank_q2;
end
end
endgenerate

// one beat ahead: masks of the beat after this one. Byte b holds x if xrem > b + BYTES; every
// such constant is below 2 BYTES = 2^XLB, so the compare is "xrem >= 2^XLB, or its XLB low bits
// above the constant". (As one 32-bit compare, ABC mapped it four LUT levels before a carry
// chain in the INT16-KV top: 6.18 ns by the calibrated model, docs/timing.md.)
localparam XLB = $clog2(2 * BYTES);
reg  [BYTES-1:0] xmask_next;
wire xrem_big = |xrem[16:XLB];
wire [31:0] xrem_lo32 = {{(32 - XLB){1'b0}}, xrem[XLB-1:0]};
localparam [16:0] XSTEP1 = 17'h1_0000 - BYTES + 17'h1_0000;   // -BYTES in 17 bits
wire [16:0] xstep = (HAS_V && x_last_q) ? xadv : XSTEP1;
always @* begin
    for (b = 0; b < BYTES; b = b + 1) begin
        xmask_next[b] = xrem_big || (xrem_lo32 > b + BYTES);
    end
end
// The row's compares take rrem's TW low bits and rrem_hi; each is a kept net of its own (one
// short carry chain or a LUT). Three formats: against the frame's threshold registers (one
// compare per byte); two: each format's constant compare a kept net of its own (cmp_a, cmp_b),
// the result chosen by fmt_b (one LUT); one: constants. Measured on the yosys netlist
// (docs/timing.md): without the kept per-format nets ABC merged the two formats' compares into
// 7 LUT levels from rrem to bmask_q (6.648 ns) once the engine around it changed (vectors);
// against bthr_q (as three formats) 6.298 ns; kept apart 5.937 ns, not among the worst paths.
wire [TW-1:0] rrem_lo = rrem[TW-1:0];
wire [31:0] rrem_lo32 = {{(32 - TW){1'b0}}, rrem_lo};
(* keep *) wire [BYTES-1:0] bmask_next;   // byte masks of the beat after this one
(* keep *) wire [BYTES-1:0] bmask_here;   // mask of a code beat that follows a scale beat
genvar gb;
generate
// Three formats: each compare is a register of its own, loaded with rrem, one step ahead (rrem is
// above a threshold after its load if K is, after a step if rrem is above the threshold plus the
// frame's elements per beat), so the flags are one LUT from registers (make timing: against the
// threshold registers ABC put two LUT levels in front of the compares' carry chains, rrem ->
// bmask_q and row_last_q 5.599 ns calibrated in the top with format 0x09).
/* verilator lint_off UNUSEDSIGNAL */
reg  [BYTES-1:0] bmn_r, bmh_r;      // rrem > bthr_q[b], rrem > hthr_q[b] (unused without
reg              ren_r, re1_r;      // rrem <= rthr_q, rrem <= r1thr_q     FORMAT_C)
/* verilator lint_on UNUSEDSIGNAL */
for (gb = 0; gb < BYTES; gb = gb + 1) begin : g_bm
    if (HAS_C) begin : g_three
        assign bmask_next[gb] = bmn_r[gb];
        assign bmask_here[gb] = bmh_r[gb];
    end else if (HAS_B) begin : g_two
        (* keep *) wire cmp_a, cmp_b;
        assign cmp_a = (rrem_lo32 > gb * WPB + LANE_ELEMS);
        assign cmp_b = (rrem_lo32 > gb * WPB_B + LANE_ELEMS_B);
        assign bmask_next[gb] = rrem_hi || (fmt_b ? cmp_b : cmp_a);
        assign bmask_here[gb] = rrem_hi || (rrem_lo32 > gb * WPB);
    end else begin : g_one
        assign bmask_next[gb] = rrem_hi || (rrem_lo32 > gb * WPB + LANE_ELEMS);
        assign bmask_here[gb] = rrem_hi || (rrem_lo32 > gb * WPB);
    end
end
endgenerate
// the row ends with the next beat: rrem <= the threshold
(* keep *) wire row_end_1;
(* keep *) wire row_end_n;
assign row_end_1 = HAS_C ? re1_r : (!rrem_hi && (rrem_lo <= R1THR_A));
assign row_end_n = HAS_C ? ren_r
                 : (!rrem_hi && ((HAS_B && fmt_b) ? (rrem_lo <= RTHR_B) : (rrem_lo <= RTHR_A)));
// rrem_hi after a step: rrem - elems >= 2^TW, i.e. rrem >= 2^(TW+1) or rrem's low bits >= elems
(* keep *) wire rrem_t2;
(* keep *) wire [2:0] rrem_ge;
assign rrem_t2 = |rrem[16:TW+1];
assign rrem_ge = {rrem_lo32 >= LANE_ELEMS_C, rrem_lo32 >= LANE_ELEMS_B, rrem_lo32 >= LANE_ELEMS};
wire hi_step = rrem_hi && (rrem_t2 || (fmt_c ? rrem_ge[2] : fmt_b ? rrem_ge[1] : rrem_ge[0]));

// The next row beat's flags (row_last_q, bmask_q), chosen by kept nets made of registers alone,
// so that rrem's compares reach the flags through one LUT: a row starts with the next beat (a
// scale beat in a grouped frame): the frame's first-beat constants (rl_const, bm_const); after
// a scale beat: row_end_1, bmask_here; before a grouped frame's scale beat: 0 (rl_const and
// bm_const again); else row_end_n, bmask_next. With the choice as nested ifs ABC put it after
// the compares: rrem to row_last_q or bmask_q in 6 LUT levels (6.4 ns in the calibrated timing
// model, docs/timing.md).
wire rl_start = (st_x && x_last_q) || (st_row && row_last_q);
(* keep *) wire rl_take_1;
(* keep *) wire rl_take_n;
(* keep *) wire rl_const;
(* keep *) wire [BYTES-1:0] bm_const;
assign rl_take_1 = !rl_start && st_row && scale_q;
assign rl_take_n = !rl_start && !(st_row && scale_q) && !(st_row && grp_f && grp_end);
assign rl_const  = rl_start && ((HAS_B && fmt_b) ? k_one_beat_b : k_one_beat);
assign bm_const  = (rl_start && !grp_f) ? ((HAS_B && fmt_b) ? bmask_k_b : bmask_k)
                                         : {BYTES{1'b0}};

// ---------------------------------------------------------------- rows
wire row_beat       = accept && st_row;
// this frame's lane beat: elements per beat, and whether it reads one bank at a time
wire [16:0] elems   = fmt_c ? ELEMS_C17 : fmt_b ? ELEMS_B17 : ELEMS_A17;
wire        narrow  = (NBANKS > 1) && (fmt_c ? (WPB_C == 1) : fmt_b ? (WPB_B == 1) : (WPB == 1));
// a row beat that is not the row's last nor a scale beat steps the x read address (a narrow
// format's after its last bank): a kept net of registers, so the address's next state is one
// LUT after it, not five LUT levels behind the format flags (docs/timing.md)
(* keep *) wire raddr_step;
assign raddr_step = !row_last_q && !scale_q && (!narrow || rsel[NBANKS-1]);
wire frame_end_rows = row_beat && row_last_q && last_row_q;

// ---------------------------------------------------------------- end of frame
// status flags from the causes registered with the tlast beat
reg [4:0] eof_flags;
always @* begin
    if (e_partial_hdr) begin
        eof_flags = F_SHORT;
    end else if (hdr_bad) begin
        eof_flags = hdr_flags;
    end else if (e_hdr_now || e_in_x) begin
        eof_flags = F_SHORT;
    end else if (e_in_row) begin
        eof_flags = e_row_ok ? 5'd0 : F_SHORT;
    end else begin
        eof_flags = F_LONG;      // draining after all N rows with a good header
    end
end

always @(posedge aclk) begin
    // datapath registers (no reset)
    s1_w      <= in_d;
    s1_bmask  <= bmask_q;
    s1_bzero  <= (bmask_q == {BYTES{1'b0}});
    s1_first  <= row_first_q;
    s1_last   <= row_last_q;
    s1_status <= {3'b000, eof_flags, e_partial_hdr ? 8'd0 : tag_reg};
    s1_fmt_b  <= fmt_b;
    s1_fmt_c  <= fmt_c;
    s1_xb     <= fmt_s;
    s1_xb9    <= fmt_sb;
    s1_xsel   <= narrow ? rsel : {NBANKS{1'b1}};
    e_partial_hdr <= st_hdr && !hdr_done;
    e_hdr_now     <= st_hdr && hdr_done;
    e_in_x        <= st_x || (HAS_V && st_vw) || (HAS_S && st_xs);   // x, the vectors word or
                                                                     // a scale table: short
    s1_nv         <= HAS_V ? nv_reg : {NVW{1'b0}};
    e_in_row      <= st_row;
    e_row_ok      <= frame_end_rows;
    if (accept && st_hdr) begin
        hdr_buf <= hdr_word;
    end
    if (hdr_load) begin
        k_reg      <= h_k;
        n_reg      <= h_n;
        chk_magic  <= !h_magic_ok;
        chk_shape  <= h_magic_ok && (h_k_zero || h_k_big || h_n_zero
                                     || ((h_fmt_s || h_fmt_sb) && h_k_odd));
        chk_format <= h_magic_ok && !h_is_a && !h_fmt_b
                      && !h_fmt_c && !h_fmt_s;
        fmt_b      <= h_fmt_b;
        fmt_c      <= h_fmt_c;
        fmt_s      <= h_fmt_s || h_fmt_sb;
        fmt_sb     <= h_fmt_sb;
        // beats of a table less one: ceil(K / 64) - 1, FORMAT_SB's ceil(K / 128) - 1
        xs_n1      <= h_fmt_sb ? {1'b0, h_k_m1[15:7]} : h_k_m1[15:6];
        xs_one     <= h_fmt_sb ? (h_k_m1[15:7] == 9'd0) : (h_k_m1[15:6] == 10'd0);
        xs_voh     <= 1;
        xv_use     <= 1;
        xwrap      <= h_fmt_c ? WRAP_C : WRAP_A;
        grp_f      <= h_grp;
        k_one_beat <= h_k_le_a && !h_grp;
        k_one_beat_b <= h_k_le_b && !h_fmt_sb;
        bmask_k_b  <= h_bmask_b;
        bthr_q     <= h_bthr;
        hthr_q     <= h_hthr;
        rthr_q     <= h_fmt_c ? RTHR_C : h_fmt_b ? RTHR_B : RTHR_A;
        r1thr_q    <= h_fmt_c ? R1THR_C : h_fmt_sb ? R1THR_B : R1THR_A;
        bthr_e_q   <= h_bthr_e;
        hthr_e_q   <= h_hthr_e;
        rthr_e_q   <= h_rthr_e;
        r1thr_e_q  <= h_r1thr_e;
        n_one      <= (h_n == 1);
        bmask_k    <= h_bmask;
        xmask_q    <= h_xmask;
        x_last_q   <= h_k_le_x;
        kx_last0   <= h_k_le_x;
        xmask0     <= h_xmask;
        xadv       <= ({1'b0, h_k} - 17'd1) & ~(BYTES - 1);   // = ceil(K / BYTES) * BYTES - BYTES
        nv_reg     <= {NVW{1'b0}};
    end
    if (HAS_V && accept && st_vw) begin
        // the vectors word: B in [7:0]; its checks are made unless the header is bad already
        // and ORed into the header's (so hdr_bad stays one LUT of three flags)
        nv_reg     <= in_d[NVW-1:0] - 1'b1;
        xv_use     <= xv_use_of(in_d[7:0]);
        chk_shape  <= chk_shape || (!hdr_bad && vw_nb_bad);
        chk_format <= chk_format || (!hdr_bad && vw_hi_nz);
    end
    if (st_x) begin
        // a vector's scale table (FORMAT_S) comes after its codes, from word 0: loaded on
        // every x beat (the last one's values are the table's), so the loads are one register
        // (st_x), not behind the accept and the last-beat flag (make timing: in_v -> xs_addr
        // at 5.99 ns)
        xs_left   <= xs_n1;
        xs_last_q <= xs_one;
        xs_addr   <= {XS_AW{1'b0}};
        xs_vl     <= x_vlast;
    end
    if (accept && st_xs) begin
        xs_left   <= xs_left - 1'b1;
        xs_last_q <= (xs_left == 10'd1);
        xs_addr   <= xs_addr + 1'b1;
        if (xs_last_q) begin
            xs_voh <= xs_voh << 1;
        end
    end
    if (accept && st_x) begin
        if (HAS_V && x_last_q) begin
            // a vector ends: the next one starts on the next beat (masks of its first beat)
            xmask_q  <= xmask0;
            x_last_q <= kx_last0;
        end else begin
            xmask_q  <= xmask_next;
            x_last_q <= (xrem <= 2 * BYTES);
        end
    end
    if (accept && (st_x || st_row)) begin
        // rl_take_n: row_end_n, bmask_next; rl_take_1: row_end_1, bmask_here; else rl_const
        row_last_q <= rl_take_n ? row_end_n : rl_take_1 ? row_end_1 : rl_const;
        bmask_q    <= rl_take_n ? bmask_next : rl_take_1 ? bmask_here : bm_const;
    end

    if (!aresetn) begin
        st_hdr      <= 1'b1;
        st_x        <= 1'b0;
        st_row      <= 1'b0;
        st_vw       <= 1'b0;
        st_xs       <= 1'b0;
        fmt_s       <= 1'b0;
        fmt_sb      <= 1'b0;
        xv_last_q   <= 1'b1;
        xvrem       <= 8'd0;
        hdr_cnt     <= 0;
        s1_valid  <= 1'b0;
        s1_eof    <= 1'b0;
        eof_d       <= 1'b0;
        tag_reg     <= 8'd0;
        chk_magic   <= 1'b0;
        chk_shape   <= 1'b0;
        chk_format  <= 1'b0;
        xrem        <= 0;
        rows_left   <= 0;
        last_row_q  <= 1'b0;
        row_first_q <= 1'b1;
        xaddr       <= 0;
        xbank       <= 0;
        xoh         <= XOH0;
        xlt         <= XLT0;
        raddr       <= 0;
        rsel        <= 1;
        fmt_b       <= 1'b0;
        fmt_c       <= 1'b0;
        scale_q     <= 1'b0;
        gcnt        <= 4'd0;
    end else begin
        s1_valid <= row_beat;
        eof_d      <= accept && in_l;
        s1_eof   <= eof_d;
        // next state, written as flat sum-of-products: tlast always ends the frame
        st_hdr <= (accept && in_l) || (st_hdr && !(accept && hdr_done));
        st_x   <= !(accept && in_l)
                  && ((st_hdr && accept && hdr_done && !h_vflag) || (HAS_V && st_vw && accept)
                      || (st_x && !(accept && (hdr_bad || (x_last_q && (x_vlast || fmt_s)))))
                      || (HAS_S && st_xs && accept && xs_last_q && !xs_vl));
        // a FORMAT_S vector's codes are followed by its scale table
        st_xs  <= HAS_S && !(accept && in_l)
                  && ((st_x && accept && x_last_q && fmt_s && !hdr_bad)
                      || (st_xs && !(accept && xs_last_q)));
        st_vw  <= HAS_V && !(accept && in_l)
                  && ((st_hdr && accept && hdr_done && h_vflag) || (st_vw && !accept));
        st_row <= !(accept && in_l)
                  && ((st_x && accept && x_last_q && x_vlast && !hdr_bad && !fmt_s)
                      || (HAS_S && st_xs && accept && xs_last_q && xs_vl)
                      || (st_row && !(accept && row_last_q && last_row_q)));
        if (HAS_V && accept && xv_en) begin
            if (st_hdr) begin
                // a frame without the flag has one vector
                xv_last_q  <= 1'b1;
            end else if (st_vw) begin
                xv_last_q  <= (in_d[7:0] <= 8'd1);
                xvrem      <= in_d[7:0] - 8'd1;
            end else begin
                // the next vector: x from its start (xvoh: its bank set, below)
                xvrem     <= xvrem - 8'd1;
                xv_last_q <= (xvrem == 8'd1);
            end
        end
        if (accept && st_hdr) begin
            if (!hdr_done) begin
                hdr_cnt <= in_l ? 2'd0 : hdr_cnt + 1'b1;
            end else begin
                hdr_cnt <= 0;
                xrem    <= {1'b0, h_k};
                xaddr   <= 0;
                xbank   <= 0;
                xoh     <= XOH0;
                xlt     <= XLT0;
                tag_reg <= hdr_word[63:56];
            end
        end
        if (accept && st_x) begin
            // a vector's last beat steps back to K (VECTORS > 1): one adder, its operand chosen
            // from registers
            xrem <= xrem + xstep;
            if (xbank == xwrap) begin
                xbank <= 0;
                xoh   <= XOH0;
                xlt   <= XLT0;
                xaddr <= xaddr + 1'b1;
            end else begin
                xbank <= xbank + 1'b1;
                xoh   <= xoh << 1;
                xlt   <= xlt << 1;
            end
            raddr       <= 0;
            rsel        <= 1;
            row_first_q <= 1'b1;
            rows_left   <= n_reg - 1'b1;
            last_row_q  <= n_one;
            scale_q     <= grp_f;
            gcnt        <= 4'd0;
        end
        if (HAS_V && x_clr) begin
            // a vector ends: the next one starts at bank 0, address 0 of its bank set (a
            // synchronous clear from one LUT of registers: x_clr)
            xbank <= 0;
            xoh   <= XOH0;
            xlt   <= XLT0;
            xaddr <= 0;
        end
        if (accept && st_row) begin
            if (row_last_q) begin
                raddr       <= 0;
                rsel        <= 1;
                row_first_q <= 1'b1;
                rows_left   <= rows_left - 1'b1;
                last_row_q  <= (rows_left == 1);
                scale_q     <= grp_f;
                gcnt        <= 4'd0;
            end else if (scale_q) begin
                row_first_q <= 1'b0;     // a scale beat: no x read, no elements
                scale_q     <= 1'b0;
            end else begin
                if (raddr_step) begin
                    raddr   <= raddr + 1'b1;
                end
                if (narrow) begin
                    rsel    <= (rsel << 1) | (rsel >> (NBANKS - 1));
                end
                row_first_q <= 1'b0;
                if (grp_f) begin
                    scale_q <= grp_end;
                    gcnt    <= grp_end ? 4'd0 : gcnt + 1'b1;
                end
            end
        end
    end
end

// the vector being captured (xvoh: one-hot; VECTORS = 1: always vector 0)
always @(posedge aclk) begin
    if (!aresetn || !HAS_V || xv_first) begin
        xvoh <= 1;
    end else if (xv_next) begin
        xvoh <= xvoh << 1;
    end
end

// row elements still to cover: its two enables are one LUT each from the input register, kept
// apart from the controller's other enables (their shared terms have large fanouts)
(* keep *) wire rrem_load;          // a row starts with the next beat
(* keep *) wire rrem_step;          // a code beat: its elements are covered
assign rrem_load = in_vr && (st_x || (st_row && row_last_q));
assign rrem_step = in_vr && st_row && !row_last_q && !scale_q;
always @(posedge aclk) begin   // no reset: loaded by every x beat before a row reads it
    if (rrem_load) begin
        rrem    <= {1'b0, k_reg};
        rrem_hi <= |k_reg[15:TW];
    end else if (rrem_step) begin
        rrem    <= rrem - elems;
        rrem_hi <= hi_step;
    end
end
// three formats: rrem's compares, one step ahead (g_bm above)
generate
if (HAS_C) begin : g_cmp_ahead
    wire [16:0] kr = {1'b0, k_reg};
    integer c;
    always @(posedge aclk) begin
        if (rrem_load) begin
            for (c = 0; c < BYTES; c = c + 1) begin
                bmn_r[c] <= (kr > {{(17-TW){1'b0}}, bthr_q[TW*c +: TW]});
                bmh_r[c] <= (kr > {{(17-TW){1'b0}}, hthr_q[TW*c +: TW]});
            end
            ren_r <= (kr <= {{(17-TW){1'b0}}, rthr_q});
            re1_r <= (kr <= {{(17-TW){1'b0}}, r1thr_q});
        end else if (rrem_step) begin
            for (c = 0; c < BYTES; c = c + 1) begin
                bmn_r[c] <= (rrem > {{(16-TW){1'b0}}, bthr_e_q[(TW+1)*c +: TW+1]});
                bmh_r[c] <= (rrem > {{(16-TW){1'b0}}, hthr_e_q[(TW+1)*c +: TW+1]});
            end
            ren_r <= (rrem <= {{(16-TW){1'b0}}, rthr_e_q});
            re1_r <= (rrem <= {{(16-TW){1'b0}}, r1thr_e_q});
        end
    end
end else begin : g_cmp_now
    always @(posedge aclk) begin    // unused: the compares are made on rrem itself
        bmn_r <= {BYTES{1'b0}};
        bmh_r <= {BYTES{1'b0}};
        ren_r <= 1'b0;
        re1_r <= 1'b0;
    end
end
endgenerate

// ---------------------------------------------------------------- stage 2
always @(posedge aclk) begin
    lane_w      <= s1_w;
    lane_bmask  <= s1_bmask;
    lane_bzero  <= s1_bzero;
    lane_first  <= s1_first;
    lane_last   <= s1_last;
    lane_status <= s1_status;
    lane_fmt_b  <= s1_fmt_b;
    lane_fmt_c  <= s1_fmt_c;
    lane_xb     <= s1_xb;
    lane_xb9    <= s1_xb9;
    lane_xsel   <= s1_xsel;
    lane_nv     <= s1_nv;
    if (!aresetn) begin
        lane_valid <= 1'b0;
        lane_eof   <= 1'b0;
    end else begin
        lane_valid <= s1_valid;
        lane_eof   <= s1_eof;
    end
end

endmodule

`resetall
