// Fixed delay line for pipeline sideband signals (valid, first, last, end-of-frame, ...).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// Every sideband delay in an engine is an instance of this module whose DEPTH comes from the
// one latency figure the generator computes, so the sideband cannot drift from the datapath.
// Bits [CTRL_W-1:0] are control and are cleared by reset; the rest carry data and are not reset.
// The last stage is always a flip-flop of its own: synthesis may put the first DEPTH - 1 stages
// of the data bits in shift-register LUTs (SRL), but an SRL's clock-to-out (about 1.5 ns on the
// 7-series -1, docs/timing.md) would start every path the output drives, often with a large
// fanout. The output register is kept out of the SRL (`keep` for yosys, `shreg_extract` and
// `srl_style` for Vivado).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module delay_line #
(
    // Bits delayed
    parameter WIDTH = 4,
    // Low bits that are control (reset to zero)
    parameter CTRL_W = 1,
    // Delay in clock cycles (0 is a wire)
    parameter DEPTH = 1
)
(
    input  wire             clk,
    input  wire             rst_n,
    input  wire [WIDTH-1:0] d,
    output wire [WIDTH-1:0] q
);

initial begin
    if (DEPTH < 0 || CTRL_W < 1 || CTRL_W > WIDTH) begin
        $display("delay_line: illegal DEPTH=%0d CTRL_W=%0d WIDTH=%0d", DEPTH, CTRL_W, WIDTH);
        $finish;
    end
end

generate
if (DEPTH == 0) begin : g_wire
    assign q = d;
end else begin : g_regs
    // stages 0 .. NS-1 (an SRL may hold them), then the output stage when DEPTH > 1
    localparam NS = (DEPTH > 1) ? DEPTH - 1 : 1;
    (* srl_style = "srl_reg" *) reg [WIDTH-1:0] stage [0:NS-1];
    integer i;
    always @(posedge clk) begin
        stage[0] <= d;
        for (i = 1; i < NS; i = i + 1) begin
            stage[i] <= stage[i-1];
        end
        if (!rst_n) begin
            for (i = 0; i < NS; i = i + 1) begin
                stage[i][CTRL_W-1:0] <= {CTRL_W{1'b0}};
            end
        end
    end
    if (DEPTH == 1) begin : g_one
        assign q = stage[0];
    end else begin : g_out
        (* shreg_extract = "no" *) reg [WIDTH-1:0] q_r;
        (* keep *)
        always @(posedge clk) begin
            q_r <= stage[NS-1];
            if (!rst_n) begin
                q_r[CTRL_W-1:0] <= {CTRL_W{1'b0}};
            end
        end
        assign q = q_r;
    end
end
endgenerate

endmodule

`resetall
