// Pipelined restoring divider: one division per clock, QB quotient bits, latency QB + 1.
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// Computes q = floor(n / d) and r = n - q * d for a numerator whose quotient is known to fit
// in QB bits (n < d * 2^QB); the caller guarantees that bound (and handles d = 0). Stage 0
// registers the inputs, stages 1..QB each decide one quotient bit, most significant first.
// SW sideband bits travel with the division (bit 0 is the valid flag, cleared by reset).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_div_pipe #
(
    // Numerator width in bits
    parameter NW = 50,
    // Denominator width in bits
    parameter DW = 42,
    // Quotient bits (the quotient must be below 2^QB)
    parameter QB = 8,
    // Sideband bits carried along (not counting the valid flag)
    parameter SW = 2
)
(
    input  wire          clk,
    input  wire          rst_n,

    input  wire          in_valid,
    input  wire [NW-1:0] in_n,
    input  wire [DW-1:0] in_d,
    input  wire [SW-1:0] in_side,

    output wire          out_valid,
    output wire [QB-1:0] out_q,
    output wire [NW-1:0] out_r,
    output wire [SW-1:0] out_side
);

localparam CW = (NW > DW + QB) ? NW : DW + QB;

initial begin
    if (NW < 1 || DW < 1 || QB < 2 || SW < 1) begin
        $display("attention_div_pipe: illegal NW=%0d DW=%0d QB=%0d SW=%0d", NW, DW, QB, SW);
        $finish;
    end
end

reg          v   [0:QB];
reg [CW-1:0] rem [0:QB];
reg [CW-1:0] den [0:QB];
reg [QB-1:0] quo [0:QB];
reg [SW-1:0] sd  [0:QB];

integer i;
always @(posedge clk) begin
    v[0]   <= in_valid;
    rem[0] <= {{(CW-NW){1'b0}}, in_n};
    den[0] <= {{(CW-DW){1'b0}}, in_d};
    quo[0] <= {QB{1'b0}};
    sd[0]  <= in_side;
    for (i = 0; i < QB; i = i + 1) begin
        v[i+1]   <= v[i];
        den[i+1] <= den[i];
        sd[i+1]  <= sd[i];
        if (rem[i] >= (den[i] << (QB - 1 - i))) begin
            rem[i+1] <= rem[i] - (den[i] << (QB - 1 - i));
            quo[i+1] <= {quo[i][QB-2:0], 1'b1};
        end else begin
            rem[i+1] <= rem[i];
            quo[i+1] <= {quo[i][QB-2:0], 1'b0};
        end
    end
    if (!rst_n) begin
        for (i = 0; i <= QB; i = i + 1) begin
            v[i] <= 1'b0;
        end
    end
end

assign out_valid = v[QB];
assign out_q     = quo[QB];
assign out_side  = sd[QB];
/* verilator lint_off UNUSEDSIGNAL */
wire [CW-1:0] rem_last = rem[QB];
/* verilator lint_on UNUSEDSIGNAL */
assign out_r = rem_last[NW-1:0];

endmodule

`resetall
