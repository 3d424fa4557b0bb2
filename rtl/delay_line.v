// Fixed delay line for pipeline sideband signals (valid, first, last, end-of-frame, ...).
//
// Part of the ternary-pynq engines (hand-written, parameterized; not generated).
// Every sideband delay in an engine is an instance of this module whose DEPTH comes from the
// one latency figure the generator computes, so the sideband cannot drift from the datapath.
// Bits [CTRL_W-1:0] are control and are cleared by reset; the rest carry data and are not reset.

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
    reg [WIDTH-1:0] stage [0:DEPTH-1];
    integer i;
    always @(posedge clk) begin
        stage[0] <= d;
        for (i = 1; i < DEPTH; i = i + 1) begin
            stage[i] <= stage[i-1];
        end
        if (!rst_n) begin
            for (i = 0; i < DEPTH; i = i + 1) begin
                stage[i][CTRL_W-1:0] <= {CTRL_W{1'b0}};
            end
        end
    end
    assign q = stage[DEPTH-1];
end
endgenerate

endmodule

`resetall
