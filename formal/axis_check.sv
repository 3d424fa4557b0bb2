// Formal checks of one AXI-Stream port pair, bound to a design by the wrapper that
// generators/formal.py writes from the rendered manifest (docs/formal.md).
//
// Part of ternary-pynq (hand-written). Read only with `read_verilog -formal -D FORMAL`.
// Clock `aclk`, synchronous active-low reset `aresetn` (the engines' convention).
//
//   formal_axis_in   ASSUMPTIONS on an input port (s_axis): the AXI-Stream rules only:
//                    once tvalid is high and the beat not taken, tvalid, tdata, tlast and
//                    tkeep hold until the handshake (a reset ends the obligation).
//   formal_axis_out  ASSERTIONS on an output port (m_axis): tvalid low after two reset
//                    cycles; while tvalid && !tready, tvalid, tdata, tlast and tkeep hold.
//                    COVERS: a stalled word accepted, a tlast word accepted.
//   formal_reset     reset in the first two cycles, and every reset lasts two cycles or more
//                    (the only assumptions besides the stream rules): the engines register
//                    aresetn once (docs/timing.md), so their state is reset in the cycle after
//                    the second reset cycle.

`default_nettype none

module formal_reset (
    input wire aclk,
    input wire aresetn
);
    reg [1:0] f_start = 2'b11;       // the first two cycles
    reg       f_rst1 = 1'b1;         // last cycle was a reset cycle
    reg       f_rst2 = 1'b1;         // ... and the one before
    always @(posedge aclk) begin
        f_start <= {f_start[0], 1'b0};
        f_rst1  <= !aresetn;
        f_rst2  <= f_rst1;
    end
    always @(*) begin
        if (f_start != 2'b00) assume (!aresetn);
        // a reset that began in the last cycle goes on in this one
        if (f_rst1 && !f_rst2) assume (!aresetn);
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
    reg          f_stall = 1'b0;   // last cycle: out of reset, tvalid && !tready
    reg [DW-1:0] f_data;
    reg [KW-1:0] f_keep;
    reg          f_last;
    always @(posedge aclk) begin
        f_stall <= aresetn && tvalid && !tready;
        f_data  <= tdata;
        f_keep  <= tkeep;
        f_last  <= tlast;
    end
    always @(*) begin
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
    reg          f_past_rst;       // last cycle was a reset cycle
    reg          f_past_rst2;      // ... and the one before (the engines' registered reset)
    reg          f_stall;          // last cycle: out of reset, tvalid && !tready
    reg [DW-1:0] f_data;
    reg [KW-1:0] f_keep;
    reg          f_last;
    always @(posedge aclk) begin
        f_past_valid <= 1'b1;
        f_past_rst   <= !aresetn;
        f_past_rst2  <= f_past_rst;
        f_stall      <= aresetn && tvalid && !tready;
        f_data       <= tdata;
        f_keep       <= tkeep;
        f_last       <= tlast;
    end
    always @(*) begin
        if (f_past_valid && f_past_rst && f_past_rst2) begin
            m_valid_low_in_reset: assert (!tvalid);
        end
        if (f_past_valid && f_stall && aresetn) begin
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
