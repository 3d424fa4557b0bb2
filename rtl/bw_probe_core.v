// Bandwidth probe (write-up Stage 2): accepts every beat, computes nothing.
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// It takes every beat up to tlast, then sends three words: the beats it took, the cycles
// from the first beat to the last one inclusive, and a status word (tag 0, no flags, count 2).
// One FIFO entry per frame holds both counts; the output side serialises them with the status.
// s_axis_tready is the FIFO's registered room flag: high on every cycle while the output flows.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module bw_probe_core #
(
    // Input data width in bits (ignored data)
    parameter DW = 64,
    // log2 of the frame FIFO depth
    parameter FIFO_ADDR_W = 4
)
(
    input  wire          aclk,
    input  wire          aresetn,      // registered once in the engine's top (docs/timing.md)
    input  wire          port_rst_n,   // the raw ARESETn: tready and tvalid low the cycle after

    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [DW-1:0] s_axis_tdata,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire          s_axis_tvalid,
    output wire          s_axis_tready,
    input  wire          s_axis_tlast,

    output wire [31:0]   m_axis_tdata,
    output wire [3:0]    m_axis_tkeep,
    output wire          m_axis_tvalid,
    input  wire          m_axis_tready,
    output wire          m_axis_tlast
);

initial begin
    if (DW < 8 || DW % 8 != 0) begin
        $display("bw_probe_core: DW=%0d must be a multiple of 8", DW);
        $finish;
    end
end

wire        room;
wire        accept = s_axis_tvalid && room;
reg         in_frame;
reg  [31:0] beats;
reg  [31:0] cycles;

// counts including the beat accepted in this cycle
wire [31:0] beats_now  = in_frame ? beats + 1 : 32'd1;
wire [31:0] cycles_now = in_frame ? cycles + 1 : 32'd1;

always @(posedge aclk) begin
    if (!aresetn) begin
        in_frame <= 1'b0;
        beats    <= 32'd0;
        cycles   <= 32'd0;
    end else begin
        if (in_frame) begin
            cycles <= cycles + 1;
        end
        if (accept) begin
            beats    <= beats_now;
            in_frame <= !s_axis_tlast;
            if (!in_frame) begin
                cycles <= 32'd1;
            end
        end
    end
end

assign s_axis_tready = room;

wire [63:0] head;
wire        head_valid;
reg  [1:0]  word;
wire        pop = head_valid && m_axis_tready && (word == 2'd2);

sync_fifo #(
    .WIDTH(64),
    .ADDR_W(FIFO_ADDR_W),
    .MARGIN(2)
) frames (
    .clk(aclk),
    .rst_n(aresetn),
    .port_rst_n(port_rst_n),       // room is s_axis_tready, vld m_axis_tvalid
    .wr_en(accept && s_axis_tlast),
    .wr_data({cycles_now, beats_now}),
    .m_data(head),
    .m_valid(head_valid),
    .m_ready(pop),
    .room(room)
);

always @(posedge aclk) begin
    if (!aresetn) begin
        word <= 2'd0;
    end else if (head_valid && m_axis_tready) begin
        word <= (word == 2'd2) ? 2'd0 : word + 1'b1;
    end
end

assign m_axis_tvalid = head_valid;
assign m_axis_tdata  = (word == 2'd0) ? head[31:0]
                     : (word == 2'd1) ? head[63:32]
                     : 32'h0002_0000;
assign m_axis_tlast  = (word == 2'd2);
assign m_axis_tkeep  = 4'hF;

endmodule

`resetall
