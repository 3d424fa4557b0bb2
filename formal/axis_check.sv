// Formal checks of one AXI-Stream port pair, bound to a design by the wrapper that
// generators/formal.py writes from the rendered manifest (docs/formal.md).
//
// Part of ternary-pynq (hand-written). Read only with `read_verilog -formal -D FORMAL`.
// Clock `aclk`, synchronous active-low reset `aresetn` (the engines' convention).
//
// The rules are AXI4-Stream's (ARM IHI 0051A; docs/formal.md quotes them):
//   formal_axis_in   on an input port (s_axis). ASSUMPTIONS, the master's rules: once tvalid
//                    is high and the beat not taken, tvalid, tdata, tlast and tkeep hold until
//                    the handshake (a reset, ARESETn low in that cycle, ends the obligation).
//                    ASSERTION on the design (the slave): tready low in every cycle after one
//                    in which aresetn was sampled low (nothing is accepted in reset).
//   formal_axis_out  ASSERTIONS on an output port (m_axis): tvalid low in every cycle after
//                    one in which aresetn was sampled low ("during reset, TVALID must be
//                    driven LOW"; it rises at the earliest in the cycle after the first edge
//                    with aresetn high); after a cycle with tvalid && !tready out of reset,
//                    tvalid, tdata, tlast and tkeep hold (in that next cycle whatever aresetn
//                    is then: a synchronous master cannot react to it before the edge).
//                    COVERS: a stalled word accepted, a tlast word accepted.
//   formal_reset     reset in the first cycle (the only assumption besides the stream rules);
//                    afterwards aresetn is free: a reset of one cycle, or none, at any time.

`default_nettype none

module formal_reset (
    input wire aclk,
    input wire aresetn
);
    reg f_start = 1'b1;              // the first cycle
    always @(posedge aclk) begin
        f_start <= 1'b0;
    end
    always @(*) begin
        if (f_start) assume (!aresetn);
    end
endmodule

module formal_axis_in #(
    parameter DW = 64,
    parameter KW = 8
) (
    input wire          aclk,
    input wire          aresetn,
    input wire [DW-1:0] tdata,
    input wire [KW-1:0] tkeep,
    input wire          tvalid,
    input wire          tready,
    input wire          tlast
);
    reg          f_past_valid = 1'b0;
    reg          f_past_rst;       // aresetn was sampled low at the last edge
    reg          f_stall = 1'b0;   // last cycle: out of reset, tvalid && !tready
    reg [DW-1:0] f_data;
    reg [KW-1:0] f_keep;
    reg          f_last;
    always @(posedge aclk) begin
        f_past_valid <= 1'b1;
        f_past_rst   <= !aresetn;
        f_stall      <= aresetn && tvalid && !tready;
        f_data       <= tdata;
        f_keep       <= tkeep;
        f_last       <= tlast;
    end
    always @(*) begin
        // the design's side: nothing is accepted in reset
        if (f_past_valid && f_past_rst) begin
            s_ready_low_in_reset: assert (!tready);
        end
        // the master's rules; a master may drop tvalid in a cycle where ARESETn is low
        if (f_stall && aresetn) begin
            s_hold_valid: assume (tvalid);
            s_hold_data:  assume (tdata == f_data);
            s_hold_keep:  assume (tkeep == f_keep);
            s_hold_last:  assume (tlast == f_last);
        end
    end
endmodule

module formal_axis_out #(
    parameter DW = 32,
    parameter KW = 4
) (
    input wire          aclk,
    input wire          aresetn,
    input wire [DW-1:0] tdata,
    input wire [KW-1:0] tkeep,
    input wire          tvalid,
    input wire          tready,
    input wire          tlast,
    // the input port of the same stream, for the cover of a refused input beat
    input wire          s_tvalid,
    input wire          s_tready
);
    reg          f_past_valid = 1'b0;
    reg          f_past_rst;       // aresetn was sampled low at the last edge
    reg          f_stall;          // last cycle: out of reset, tvalid && !tready
    reg [DW-1:0] f_data;
    reg [KW-1:0] f_keep;
    reg          f_last;
    always @(posedge aclk) begin
        f_past_valid <= 1'b1;
        f_past_rst   <= !aresetn;
        f_stall      <= aresetn && tvalid && !tready;
        f_data       <= tdata;
        f_keep       <= tkeep;
        f_last       <= tlast;
    end
    always @(*) begin
        if (f_past_valid && f_past_rst) begin
            m_valid_low_in_reset: assert (!tvalid);
        end
        if (f_past_valid && f_stall) begin
            m_hold_valid: assert (tvalid);
            m_hold_data:  assert (tdata == f_data);
            m_hold_keep:  assert (tkeep == f_keep);
            m_hold_last:  assert (tlast == f_last);
        end
    end
    // interesting states are reached (run as an SBY cover task)
    always @(*) begin
        if (f_past_valid && aresetn) begin
            c_stalled_word_accepted: cover (f_stall && tvalid && tready);
            c_tlast_word_accepted:   cover (tvalid && tready && tlast);
            c_input_refused_while_output_stalled: cover (s_tvalid && !s_tready && tvalid && !tready);
        end
    end
endmodule

`default_nettype wire
