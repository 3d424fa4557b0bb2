// Output merger of one overlay port: whole output frames of two engines, in input order.
//
// Part of the ternary-pynq overlay (hand-written, parameterized; not generated).
// The port's router pushes a token per input frame that answers on this port (0: input 0, the
// matrix engine; 1: input 1, the attention engine) into a frame-order FIFO. The head token
// picks the input whose words are forwarded, up to and including its tlast; then the token is
// popped. A frame whose output is not there yet holds back later frames of the other engine:
// the port answers in the order it accepted frames (docs/overlay.md).
// The output is a register slice (axis_skid): no combinational path from m_ready to the
// inputs' ready or to m_valid/m_data. tok_room is the FIFO's registered room flag.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module axis_order_merge #
(
    // Word width of both inputs and the output
    parameter DW = 32,
    // log2 of the frame-order FIFO depth (frames accepted but not yet answered)
    parameter ORDER_AW = 4
)
(
    input  wire          clk,
    input  wire          rst_n,
    input  wire          port_rst_n,   // the raw ARESETn where m_valid is a port (else 1'b1)

    input  wire          tok_push,
    input  wire          tok_data,
    output wire          tok_room,

    input  wire [DW-1:0] s0_data,
    input  wire          s0_last,
    input  wire          s0_valid,
    output wire          s0_ready,

    input  wire [DW-1:0] s1_data,
    input  wire          s1_last,
    input  wire          s1_valid,
    output wire          s1_ready,

    output wire [DW-1:0] m_data,
    output wire          m_last,
    output wire          m_valid,
    input  wire          m_ready
);

wire tok_valid;
wire tok;
wire o_ready;
wire q_valid, q_tok, q_ready;     // the order FIFO's head, before the token register

wire sel_valid = tok_valid && (tok ? s1_valid : s0_valid);
wire sel_last  = tok ? s1_last : s0_last;
// pop in one LUT after the token (kept nets: each input's last beat present, from registers),
// so the token slice's enables are not four LUT levels behind the token (docs/timing.md)
(* keep *) wire end0;
(* keep *) wire end1;
(* keep *) wire pop;
assign end0 = s0_valid && s0_last;
assign end1 = s1_valid && s1_last;
assign pop  = tok_valid && o_ready && (tok ? end1 : end0);

assign s0_ready = tok_valid && !tok && o_ready;
assign s1_ready = tok_valid && tok && o_ready;

// three writes can be in flight when the registered room flag falls (the router registers
// its push)
sync_fifo #(
    .WIDTH(1),
    .ADDR_W(ORDER_AW),
    .MARGIN(3)
) order (
    .clk(clk),
    .rst_n(rst_n),
    .port_rst_n(1'b1),
    .wr_en(tok_push),
    .wr_data(tok_data),
    .m_data(q_tok),
    .m_valid(q_valid),
    .m_ready(q_ready),
    .room(tok_room)
);

// the head token registered (a register slice): the merger's selects start at a flip-flop,
// not at the FIFO's LUTRAM read, and the FIFO's read does not wait for pop (docs/timing.md)
/* verilator lint_off UNUSEDSIGNAL */
wire tok_last_unused;
/* verilator lint_on UNUSEDSIGNAL */
axis_skid #(.DATA_W(1)) tok_slice (
    .clk(clk), .rst_n(rst_n), .port_rst_n(1'b1),
    .s_data(q_tok), .s_last(1'b0), .s_valid(q_valid), .s_ready(q_ready),
    .m_data(tok), .m_last(tok_last_unused), .m_valid(tok_valid), .m_ready(pop)
);

axis_skid #(.DATA_W(DW)) out_slice (
    .clk(clk), .rst_n(rst_n), .port_rst_n(port_rst_n),
    .s_data(tok ? s1_data : s0_data), .s_last(sel_last), .s_valid(sel_valid), .s_ready(o_ready),
    .m_data(m_data), .m_last(m_last), .m_valid(m_valid), .m_ready(m_ready)
);

endmodule

`resetall
