// Back end shared by every matrix-vector engine: sideband delay, accumulator, result FIFO,
// status word (DESIGN.md section 3).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// The sideband from the stream controller (valid, first, last, end-of-frame, status) is
// delayed by LANE_LAT cycles, the lane's latency as computed by the generator, so it meets the
// lane's partial sum. On the last beat of a row the accumulated sum is written to the result
// FIFO; on the end-of-frame token the status word follows it, in order, through the same FIFO.
//
// Frames of B vectors (VECTORS > 1, docs/vectors.md): the lane gives VECTORS partial sums per
// beat (vector v in psum[v*PSUM_W +: PSUM_W], its carry in psum_ci[v]); VECTORS accumulators
// run side by side, and a row's last beat writes ONE FIFO entry holding all its B results
// ({status?, B-1, sums}: a VECTORS*32-bit entry, LUTRAM). The read side sends an entry's
// words one per clock, vector 0 first, from two entry registers behind the FIFO (a V:1 word
// select on flip-flops) through a register slice (two cycles more latency than VECTORS = 1,
// whose FIFO head drives m_axis); a status entry is one word. So the FIFO takes at most one
// entry per clock whatever B is, its room flag counts entries as before, and a frame whose rows
// are shorter than B beats fills the FIFO until room falls: then the output's one word per
// clock sets the rate (B words per row).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module mv_backend #
(
    // Width of the lane's signed partial sum
    parameter PSUM_W = 18,
    // Lane latency in cycles (from the generator's latency figure)
    parameter LANE_LAT = 3,
    // log2 of the result FIFO depth
    parameter FIFO_ADDR_W = 5,
    // Words that can still arrive after `room` falls (from the generator)
    parameter FIFO_MARGIN = 8,
    // Partial sums per beat: the most activation vectors of a frame
    parameter VECTORS = 1,
    // Bits of sb_nv (B - 1)
    parameter NVW = (VECTORS <= 2) ? 1 : $clog2(VECTORS)
)
(
    input  wire              aclk,
    input  wire              aresetn,      // registered once in the engine's top (docs/timing.md)
    input  wire              port_rst_n,   // the raw ARESETn: room (s_axis_tready) and m_axis_tvalid
                                           // low the cycle after it is sampled low

    // sideband from the stream controller (stage 1)
    input  wire              sb_valid,
    input  wire              sb_first,
    input  wire              sb_last,
    input  wire              sb_eof,
    input  wire [15:0]       sb_status,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [NVW-1:0]    sb_nv,       // the frame's B - 1 (unused when VECTORS = 1)
    /* verilator lint_on UNUSEDSIGNAL */

    // from the lane, LANE_LAT cycles after stage 1
    input  wire [VECTORS*PSUM_W-1:0] psum,
    input  wire [VECTORS-1:0] psum_ci,    // one more to add (a carry the lane's tree had no adder for)
    input  wire              lane_bad,

    output wire              room,

    output wire [31:0]       m_axis_tdata,
    output wire [3:0]        m_axis_tkeep,
    output wire              m_axis_tvalid,
    input  wire              m_axis_tready,
    output wire              m_axis_tlast
);

initial begin
    if (PSUM_W < 2 || PSUM_W > 32) begin
        $display("mv_backend: PSUM_W=%0d out of range 2..32", PSUM_W);
        $finish;
    end
    if (VECTORS < 1 || VECTORS > 255) begin
        $display("mv_backend: VECTORS=%0d out of range 1..255", VECTORS);
        $finish;
    end
    if (LANE_LAT < 0) begin
        $display("mv_backend: LANE_LAT=%0d must be >= 0", LANE_LAT);
        $finish;
    end
end

// the sideband through the lane's latency; a FIFO write is decided before the delay (d_wr, and
// d_kind: 0 a row result, 1 the status word), so one write per cycle is all the delay can hold
wire        d_valid, d_first;
wire        d_wr, d_kind;
wire [15:0] d_status;
/* verilator lint_off UNUSEDSIGNAL */
wire [NVW-1:0] d_nv;                  // unused when VECTORS = 1
/* verilator lint_on UNUSEDSIGNAL */

// (with VECTORS = 1 the B - 1 bits are a constant nobody reads: synthesis removes them)
delay_line #(
    .WIDTH(19 + NVW),
    .CTRL_W(2),
    .DEPTH(LANE_LAT)
) sideband (
    .clk(aclk),
    .rst_n(aresetn),
    .d({sb_nv, sb_status, sb_eof, sb_eof || (sb_valid && sb_last), sb_valid}),
    .q({d_nv, d_status, d_kind, d_wr, d_valid})
);

// "first beat of a row" clears every accumulator bit (VECTORS * 32 loads). With LANE_LAT >= 1
// the clear is known a cycle ahead (f_pre: d_first of the next cycle), so the accumulators are
// cleared by a synchronous reset in the cycle before a row's first beat and the adder's
// operands are flip-flops, no select in front of its carry chain (the accumulate-and-write
// path into the result FIFO's LUTRAM, docs/timing.md). `first` falls only after a valid beat
// carrying it, so the sums are the same as adding the first beat to zero.
wire acc_clr;                         // the accumulators start a row next cycle
generate
if (LANE_LAT >= 1) begin : g_first
    wire f_pre;
    if (LANE_LAT >= 2) begin : g_dl
        delay_line #(.WIDTH(1), .CTRL_W(1), .DEPTH(LANE_LAT - 1)) first_dl (
            .clk(aclk), .rst_n(aresetn), .d(sb_first), .q(f_pre)
        );
    end else begin : g_wire
        assign f_pre = sb_first;
    end
    assign acc_clr = f_pre;
    assign d_first = 1'b0;            // folded into the clear
end else begin : g_first0
    assign acc_clr = 1'b0;
    assign d_first = sb_first;
end
endgenerate

// one accumulator per vector
wire [VECTORS*32-1:0] acc_next;
genvar gv;
generate
for (gv = 0; gv < VECTORS; gv = gv + 1) begin : g_acc
    reg  signed [31:0] acc;
    wire signed [PSUM_W-1:0] ps = psum[gv*PSUM_W +: PSUM_W];
    wire signed [31:0] nxt = (d_first ? 32'sd0 : acc) + {{(32-PSUM_W){ps[PSUM_W-1]}}, ps}
                           + {31'd0, psum_ci[gv]};
    always @(posedge aclk) begin
        if (acc_clr) begin
            acc <= 32'sd0;
        end else if (d_valid) begin
            acc <= nxt;
        end
    end
    assign acc_next[gv*32 +: 32] = nxt;
end
endgenerate

reg  [15:0]        count;
reg                bad_seen;
wire               bad_now  = bad_seen | (d_valid & lane_bad);

wire        wr_res    = d_wr && !d_kind;
wire        wr_status = d_wr && d_kind;
wire [31:0] st_word   = {count, d_status[15:8] | {2'b00, bad_now, 5'b00000}, d_status[7:0]};

always @(posedge aclk) begin
    if (!aresetn) begin
        count    <= 16'd0;
        bad_seen <= 1'b0;
    end else if (wr_status) begin
        count    <= 16'd0;
        bad_seen <= 1'b0;
    end else begin
        bad_seen <= bad_now;
        if (wr_res) count <= count + 1'b1;
    end
end

// entry: {status, B - 1, VECTORS words} (a status entry: B - 1 = 0, the word in slot 0);
// with VECTORS = 1 the entry is {status, word}, 33 bits, and every word is popped as it is sent
localparam EW = (VECTORS > 1) ? 1 + NVW + VECTORS*32 : 33;
wire [EW-1:0] wr_entry;
wire [EW-1:0] head;
wire          head_valid;
wire          head_pop;                 // the head entry's last word is taken
/* verilator lint_off UNUSEDSIGNAL */
wire [NVW-1:0] widx;                    // the word of the entry on m_axis (0 for VECTORS = 1)
wire           out_valid;               // an entry is on m_axis
wire [NVW-1:0] out_nv;                  // its B - 1 (0 for VECTORS = 1)
wire           out_second;              // a second entry waits behind it (0 for VECTORS = 1)
/* verilator lint_on UNUSEDSIGNAL */

sync_fifo #(
    .WIDTH(EW),
    .ADDR_W(FIFO_ADDR_W),
    .MARGIN(FIFO_MARGIN)
) results (
    .clk(aclk),
    .rst_n(aresetn),
    .port_rst_n(port_rst_n),
    .wr_en(d_wr),
    .wr_data(wr_entry),
    .m_data(head),
    .m_valid(head_valid),
    .m_ready(head_pop),
    .room(room)
);

generate
if (VECTORS > 1) begin : g_words
    // the read side: two entry registers after the FIFO (o0 whose words are sent, o1 behind
    // it), then a register slice (out_slice) on m_axis. The FIFO is read while one of the two
    // entry registers is free, a decision of registers alone, so neither m_axis_tready nor the
    // word index reaches the FIFO's pop and its count's carry chain (docs/timing.md); the word
    // select and the "last word" compare work on flip-flops; and the entry registers' enables
    // (about 2 x VECTORS x 32 loads each) see only the slice's registered ready, never
    // m_axis_tready (which in the PL top comes from the output merger through logic). Two
    // cycles more latency than VECTORS = 1 (out_stages in generators/designs/mv_common.py).
    assign wr_entry = d_kind ? {1'b1, {NVW{1'b0}}, {(VECTORS-1)*32{1'b0}}, st_word}
                             : {1'b0, d_nv, acc_next};
    reg  [EW-1:0]  o0, o1;
    reg            o0v, o1v;
    reg  [NVW-1:0] widx_q;
    wire           w_ready;                                    // out_slice's registered ready
    wire           last_word = (widx_q == o0[EW-2 -: NVW]);
    wire           pop       = o0v && w_ready && last_word;     // o0's last word taken
    wire           take      = head_valid && !(o0v && o1v);         // the FIFO's head comes in
    always @(posedge aclk) begin
        // o0: kept, or o1 moves up, or the FIFO's head comes in; o1: kept or the head
        if (!o0v || pop) begin
            o0 <= o1v ? o1 : head;
        end
        if (!o1v || pop) begin
            // o1 takes the head whenever it is free after this cycle (kept only when o1v says
            // so): its enable is one LUT of registers, not the "take into o1" decision
            o1 <= head;
        end
        if (!aresetn) begin
            o0v    <= 1'b0;
            o1v    <= 1'b0;
            widx_q <= {NVW{1'b0}};
        end else begin
            o0v <= (o0v && !pop) || o1v || take;
            o1v <= o1v ? (!pop || take) : (take && o0v && !pop);
            if (o0v && w_ready) begin
                widx_q <= last_word ? {NVW{1'b0}} : widx_q + 1'b1;
            end
        end
    end
    axis_skid #(.DATA_W(32)) out_slice (
        .clk(aclk), .rst_n(aresetn), .port_rst_n(port_rst_n),
        .s_data(o0[32*widx_q +: 32]), .s_last(o0[EW-1]), .s_valid(o0v), .s_ready(w_ready),
        .m_data(m_axis_tdata), .m_last(m_axis_tlast), .m_valid(m_axis_tvalid),
        .m_ready(m_axis_tready)
    );
    assign widx          = widx_q;
    assign head_pop      = take;
    assign out_valid     = o0v;
    assign out_nv        = o0[EW-2 -: NVW];
    assign out_second    = o1v;
end else begin : g_word
    assign wr_entry      = d_kind ? {1'b1, st_word} : {1'b0, acc_next};
    assign head_pop      = m_axis_tready;
    assign m_axis_tdata  = head[31:0];
    assign m_axis_tvalid = head_valid;
    assign m_axis_tlast  = head[EW-1];
    assign widx          = {NVW{1'b0}};
    assign out_valid     = head_valid;
    assign out_nv        = {NVW{1'b0}};
    assign out_second    = 1'b0;
end
endgenerate

assign m_axis_tkeep = 4'hF;

endmodule

`resetall
