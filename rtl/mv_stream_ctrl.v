// Stream controller shared by every matrix-vector engine (DESIGN.md section 3).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
//
// It parses the header, captures x from the stream into WPB banks (no AXI-Lite, no BRAM
// controller), sequences the rows with runtime K and N, and hands each row beat to the
// compute lane with x already read (the x read is a register stage of its own). It raises the
// error flags of the contract and sends an end-of-frame token down the pipeline, in a slot of
// its own, carrying the tag and flags the back end writes into the status word.
//
// Lane interface, all registered ("stage 1"):
//   lane_valid  a row beat: lane_w holds BYTES weight bytes, lane_x the BYTES*WPB x elements
//   lane_first  first beat of a row        lane_last   last beat of a row
//   lane_bmask  bit b: weight byte b holds at least one weight of index < K
//   lane_eof    end-of-frame token (never together with lane_valid); lane_status = {flags, tag}
// x past K reads as zero: the last x beat is masked and, for WPB > 1, the banks after it are
// zeroed at the same address, so no stale x of an earlier frame can leak into a row.
// s_axis_tready is the back end's registered `room` flag and nothing else.

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
    // Largest K accepted
    parameter MAX_K = 512,
    // Input data width
    parameter DW = BYTES*8,
    // x elements per lane beat, in bits
    parameter XW = DW*WPB,
    // Header beats: the 8-byte header padded to whole beats
    parameter HDR_BEATS = (8 + BYTES - 1) / BYTES,
    // Words per x bank
    parameter X_DEPTH = (MAX_K + BYTES*WPB - 1) / (BYTES*WPB),
    // Address width of the x banks
    parameter XA_W = (X_DEPTH <= 2) ? 1 : $clog2(X_DEPTH),
    // x store in block RAM (1) or distributed RAM (0)
    parameter X_BRAM = (MAX_K >= 256) ? 1 : 0
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
    output wire [XW-1:0]    lane_x,
    output reg  [BYTES-1:0] lane_bmask,
    output reg  [15:0]      lane_status
);

localparam [15:0] MAGIC = 16'hB158;
localparam LANE_ELEMS = BYTES * WPB;

localparam [1:0] S_HDR = 2'd0, S_X = 2'd1, S_ROW = 2'd2, S_DRAIN = 2'd3;

// flag bits of the status word
localparam [4:0] F_MAGIC = 5'b00001, F_SHAPE = 5'b00010, F_FORMAT = 5'b00100,
                 F_SHORT = 5'b01000, F_LONG = 5'b10000;
localparam [1:0] HDR_LAST = HDR_BEATS[1:0] - 2'd1;

initial begin
    if (BYTES != 4 && BYTES != 8 && BYTES != 16) begin
        $display("mv_stream_ctrl: BYTES=%0d, must be 4, 8 or 16", BYTES);
        $finish;
    end
    if (WPB != 1 && WPB != 5) begin
        $display("mv_stream_ctrl: WPB=%0d, must be 1 or 5", WPB);
        $finish;
    end
    if (MAX_K < 1 || MAX_K > 65535) begin
        $display("mv_stream_ctrl: MAX_K=%0d out of range 1..65535", MAX_K);
        $finish;
    end
end

reg  [1:0]  state;
reg  [1:0]  hdr_cnt;
/* verilator lint_off UNUSEDSIGNAL */
reg  [63:0] hdr_buf;   // unused when one beat holds the whole header
/* verilator lint_on UNUSEDSIGNAL */
reg  [15:0] k_reg;
reg  [15:0] n_reg;
reg  [7:0]  tag_reg;
reg  [4:0]  flags;
reg  [16:0] xrem;      // x elements still to come, before this beat
reg  [16:0] rrem;      // elements of the row not yet covered, before this beat
reg  [15:0] rows_left; // rows after the current one
reg  [XA_W-1:0] xaddr;
reg  [2:0]  xbank;
reg  [XA_W-1:0] raddr;
reg         eof_d;
reg  [15:0] status_d;

assign s_axis_tready = room;
wire accept = s_axis_tvalid && room;

// ---------------------------------------------------------------- header decode
wire [63:0] hdr_word;
generate
if (DW >= 64) begin : g_hdr_wide
    assign hdr_word = s_axis_tdata[63:0];
end else begin : g_hdr_narrow
    // beats arrive low word first; the final beat completes the header
    assign hdr_word = {s_axis_tdata, hdr_buf[63:DW]};
end
endgenerate

wire        hdr_done  = (hdr_cnt == HDR_LAST);
wire [15:0] h_magic   = hdr_word[15:0];
wire [15:0] h_k       = hdr_word[31:16];
wire [15:0] h_n       = hdr_word[47:32];
wire [7:0]  h_format  = hdr_word[55:48];
wire [7:0]  h_tag     = hdr_word[63:56];
wire        h_bad_magic  = (h_magic != MAGIC);
wire        h_k_big;
generate
if (MAX_K < 65535) begin : g_kcheck
    assign h_k_big = (h_k > MAX_K);
end else begin : g_kfull
    assign h_k_big = 1'b0;  // every 16-bit K is legal
end
endgenerate
wire        h_bad_shape  = !h_bad_magic && (h_k == 0 || h_k_big || h_n == 0);
wire        h_bad_format = !h_bad_magic && (h_format != FORMAT);
wire        h_bad = h_bad_magic || h_bad_shape || h_bad_format;
wire [4:0]  h_flags = (h_bad_magic ? F_MAGIC : 5'd0) | (h_bad_shape ? F_SHAPE : 5'd0)
                    | (h_bad_format ? F_FORMAT : 5'd0);

// ---------------------------------------------------------------- x capture
wire x_last_beat = (xrem <= BYTES);
reg  [DW-1:0] x_masked;
integer b;
always @* begin
    for (b = 0; b < BYTES; b = b + 1) begin
        x_masked[8*b +: 8] = (b < xrem) ? s_axis_tdata[8*b +: 8] : 8'd0;
    end
end

wire x_wr = accept && (state == S_X);
wire [XA_W-1:0] rd_addr = raddr;

genvar g;
generate
for (g = 0; g < WPB; g = g + 1) begin : g_bank
    reg [DW-1:0] bank_q;
    // this bank is written with the beat, or zeroed when it lies after the last x beat
    wire wr_this;
    if (g == 0) begin : g_first
        assign wr_this = x_wr && (xbank == 0);
    end else begin : g_later
        assign wr_this = x_wr && ((xbank == g) || (x_last_beat && (xbank < g)));
    end
    if (X_BRAM) begin : g_bram
        (* ram_style = "block" *) reg [DW-1:0] bank [0:X_DEPTH-1];
        always @(posedge aclk) begin
            if (wr_this) begin
                bank[xaddr] <= (xbank == g) ? x_masked : {DW{1'b0}};
            end
            bank_q <= bank[rd_addr];
        end
    end else begin : g_lutram
        (* ram_style = "distributed" *) reg [DW-1:0] bank [0:X_DEPTH-1];
        always @(posedge aclk) begin
            if (wr_this) begin
                bank[xaddr] <= (xbank == g) ? x_masked : {DW{1'b0}};
            end
            bank_q <= bank[rd_addr];
        end
    end
    assign lane_x[g*DW +: DW] = bank_q;
end
endgenerate

// ---------------------------------------------------------------- row sequencing
wire row_last_beat = (rrem <= LANE_ELEMS);
reg  [BYTES-1:0] bmask_next;
always @* begin
    for (b = 0; b < BYTES; b = b + 1) begin
        bmask_next[b] = (b * WPB < rrem);
    end
end
wire row_beat  = accept && (state == S_ROW);
wire frame_end_rows = row_beat && row_last_beat && (rows_left == 0);

// ---------------------------------------------------------------- end of frame
reg       eof_now;
reg [4:0] eof_flags;
reg [7:0] eof_tag;
always @* begin
    eof_now   = 1'b0;
    eof_flags = flags;
    eof_tag   = tag_reg;
    if (accept && s_axis_tlast) begin
        eof_now = 1'b1;
        case (state)
            S_HDR: begin
                if (!hdr_done) begin
                    // the header itself is cut short: no tag was received
                    eof_flags = F_SHORT;
                    eof_tag   = 8'd0;
                end else begin
                    eof_flags = h_bad ? h_flags : F_SHORT;
                    eof_tag   = h_tag;
                end
            end
            S_X: eof_flags = flags | F_SHORT;
            S_ROW: eof_flags = frame_end_rows ? flags : (flags | F_SHORT);
            default: eof_flags = flags;
        endcase
    end
end

always @(posedge aclk) begin
    // datapath registers (no reset)
    lane_w     <= s_axis_tdata;
    lane_bmask <= bmask_next;
    lane_first <= (raddr == 0);
    lane_last  <= row_last_beat;
    status_d   <= {3'b000, eof_flags, eof_tag};
    lane_status <= status_d;
    if (accept && state == S_HDR) begin
        hdr_buf <= hdr_word;
        if (hdr_done) begin
            k_reg   <= h_k;
            n_reg   <= h_n;
        end
    end

    if (!aresetn) begin
        state      <= S_HDR;
        hdr_cnt    <= 0;
        flags      <= 0;
        lane_valid <= 1'b0;
        lane_eof   <= 1'b0;
        eof_d      <= 1'b0;
        tag_reg    <= 8'd0;
        xrem       <= 0;
        rrem       <= 0;
        rows_left  <= 0;
        xaddr      <= 0;
        xbank      <= 0;
        raddr      <= 0;
    end else begin
        lane_valid <= row_beat;
        eof_d      <= eof_now;
        lane_eof   <= eof_d;
        if (accept) begin
            case (state)
                S_HDR: begin
                    if (!hdr_done) begin
                        hdr_cnt <= hdr_cnt + 1'b1;
                        if (s_axis_tlast) hdr_cnt <= 0;
                    end else begin
                        hdr_cnt <= 0;
                        xrem    <= {1'b0, h_k};
                        xaddr   <= 0;
                        xbank   <= 0;
                        flags   <= h_flags;
                        tag_reg <= h_tag;
                        if (s_axis_tlast) state <= S_HDR;
                        else if (h_bad) state <= S_DRAIN;
                        else state <= S_X;
                    end
                end
                S_X: begin
                    xrem <= xrem - BYTES;
                    if (xbank == WPB - 1) begin
                        xbank <= 0;
                        xaddr <= xaddr + 1'b1;
                    end else begin
                        xbank <= xbank + 1'b1;
                    end
                    raddr     <= 0;
                    rrem      <= {1'b0, k_reg};
                    rows_left <= n_reg - 1'b1;
                    if (s_axis_tlast) state <= S_HDR;
                    else if (x_last_beat) state <= S_ROW;
                end
                S_ROW: begin
                    if (row_last_beat) begin
                        raddr     <= 0;
                        rrem      <= {1'b0, k_reg};
                        rows_left <= rows_left - 1'b1;
                    end else begin
                        raddr <= raddr + 1'b1;
                        rrem  <= rrem - LANE_ELEMS;
                    end
                    if (s_axis_tlast) state <= S_HDR;
                    else if (frame_end_rows) begin
                        state <= S_DRAIN;
                        flags <= flags | F_LONG;
                    end
                end
                default: begin
                    if (s_axis_tlast) state <= S_HDR;
                end
            endcase
        end
    end
end

endmodule

`resetall
