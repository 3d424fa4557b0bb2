// Frame router of one overlay port: the first 8-byte word of a frame picks its destination.
//
// Part of the ternary-pynq overlay (hand-written, parameterized; not generated).
// Contract: docs/overlay.md. On the first word of a frame (the word
// after a tlast or reset), bits [15:0]:
//   PORT 0, 16'hA77E  the frame goes to the attention side (the joiner's side A), this word too;
//   PORT 1, 16'hA77F  a route word: consumed here, the rest of the frame goes to the attention
//                     side (the joiner's side B);
//   anything else     the frame goes to the matrix engine (which answers BAD_MAGIC for any
//                     magic but 16'hB158, so no frame is lost without a status word).
// Every frame that will answer on this port (ORDER = 1) pushes a token into the output
// merger's frame-order FIFO on its first word: 0 matrix, 1 attention; the push is registered
// (it lands one cycle after the word, long before the frame's first output word). With the
// order FIFO short of room the first word waits.
// Both outputs are register slices (axis_skid): s_ready depends on their registered ready
// flags, the registered order-FIFO room and the input word, never on a downstream ready.
// s_att is the magic compare of the word (bits [15:0] == this port's attention magic), made
// in front of the register slice that feeds the router, so the decision starts from a
// register (a 16-bit compare takes two LUT levels).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module axis_frame_router #
(
    // Port number: 0 (attention magic 16'hA77E, word forwarded) or 1 (route magic 16'hA77F,
    // word consumed)
    parameter PORT = 0,
    // Word width (the 8-byte DMA word)
    parameter DW = 64,
    // Push frame-order tokens (1 on a port whose merger orders matrix and attention output)
    parameter ORDER = 1
)
(
    input  wire          clk,
    input  wire          rst_n,

    input  wire [DW-1:0] s_data,
    input  wire          s_att,      // s_data[15:0] is this port's attention magic
    input  wire          s_last,
    input  wire          s_valid,
    output wire          s_ready,

    // to the matrix engine
    output wire [DW-1:0] mat_data,
    output wire          mat_last,
    output wire          mat_valid,
    input  wire          mat_ready,

    // to the attention joiner
    output wire [DW-1:0] att_data,
    output wire          att_last,
    output wire          att_valid,
    input  wire          att_ready,

    // frame-order token: 0 matrix, 1 attention (registered)
    output reg           tok_push,
    output reg           tok_data,
    input  wire          tok_room
);

initial begin
    if (PORT != 0 && PORT != 1) begin
        $display("axis_frame_router: PORT=%0d must be 0 or 1", PORT);
        $finish;
    end
end

reg  in_frame;      // a frame's first word has been taken
reg  dest_att_q;    // its destination

wire first     = !in_frame;
wire is_att    = s_att;
wire dest_att  = first ? is_att : dest_att_q;
wire drop      = first && is_att && (PORT == 1);          // the route word
wire need_tok  = (ORDER != 0) && first && !drop;
wire tok_ok    = !need_tok || tok_room;

wire r_mat_ready, r_att_ready;
wire to_mat    = s_valid && tok_ok && !dest_att;
wire to_att    = s_valid && tok_ok && dest_att && !drop;

assign s_ready  = tok_ok && (drop || (dest_att ? r_att_ready : r_mat_ready));
wire   hs       = s_valid && s_ready;

always @(posedge clk) begin
    tok_data <= dest_att;
    if (!rst_n) begin
        tok_push <= 1'b0;
    end else begin
        tok_push <= hs && need_tok;
    end
end

always @(posedge clk) begin
    if (!rst_n) begin
        in_frame   <= 1'b0;
        dest_att_q <= 1'b0;
    end else if (hs) begin
        in_frame <= !s_last;
        if (first) begin
            dest_att_q <= is_att;
        end
    end
end

axis_skid #(.DATA_W(DW)) mat_slice (
    .clk(clk), .rst_n(rst_n), .port_rst_n(1'b1),
    .s_data(s_data), .s_last(s_last), .s_valid(to_mat), .s_ready(r_mat_ready),
    .m_data(mat_data), .m_last(mat_last), .m_valid(mat_valid), .m_ready(mat_ready)
);

axis_skid #(.DATA_W(DW)) att_slice (
    .clk(clk), .rst_n(rst_n), .port_rst_n(1'b1),
    .s_data(s_data), .s_last(s_last), .s_valid(to_att), .s_ready(r_att_ready),
    .m_data(att_data), .m_last(att_last), .m_valid(att_valid), .m_ready(att_ready)
);

endmodule

`resetall
