// Sequential non-restoring divider: QB quotient bits in QB clocks.
//
// Part of the ternary-pynq attention engine (hand-written, parameterized; not generated).
// `start` loads n and d; one quotient bit is decided per clock, most significant first;
// `done` rises QB clocks after `start` and stays high (with q) until the next `start`.
// The caller guarantees n < d * 2^QB and d != 0.
//
// Long-division form, non-restoring (as attention_div_pipe): the partial remainder stays in
// [-d, d), DW + 1 bits signed, and each step is one DW + 3 bit addition (subtract d when it is
// >= 0, add d when it is < 0) with the operand inversion in the adder's LUTs. The low QB
// numerator bits shift out at the top of `q` as the quotient bits shift in at the bottom.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module attention_div_seq #
(
    // Numerator width in bits
    parameter NW = 68,
    // Denominator width in bits
    parameter DW = 36,
    // Quotient bits (the quotient must be below 2^QB)
    parameter QB = 32
)
(
    input  wire          clk,
    input  wire          rst_n,

    input  wire          start,
    input  wire [NW-1:0] n,
    input  wire [DW-1:0] d,

    output reg           done,
    output reg  [QB-1:0] q
);

localparam CW = (NW > DW + QB) ? NW : DW + QB;
localparam CNT_W = $clog2(QB + 1);

initial begin
    if (NW < 1 || DW < 1 || QB < 2) begin
        $display("attention_div_seq: illegal NW=%0d DW=%0d QB=%0d", NW, DW, QB);
        $finish;
    end
end

// numerator zero-extended; its bits above DW + QB are zero by the caller's bound
/* verilator lint_off UNUSEDSIGNAL */
wire [CW-1:0] nz = {{(CW-NW){1'b0}}, n};
/* verilator lint_on UNUSEDSIGNAL */

reg  [DW:0]      rem;     // partial remainder, signed, in [-d, d)
reg  [DW-1:0]    den;
reg  [CNT_W-1:0] left;
wire             sub  = ~rem[DW];
wire [DW+1:0]    t    = {rem, q[QB-1]};
wire [DW+1:0]    dx   = {2'b00, den} ^ {(DW+2){sub}};
/* verilator lint_off UNUSEDSIGNAL */
wire [DW+2:0]    sum  = {t, 1'b1} + {dx, sub};   // t - d or t + d, carry-in on bit 0
/* verilator lint_on UNUSEDSIGNAL */

always @(posedge clk) begin
    if (!rst_n) begin
        done <= 1'b0;
        left <= {CNT_W{1'b0}};
        rem  <= {(DW+1){1'b0}};
        den  <= {DW{1'b0}};
        q    <= {QB{1'b0}};
    end else if (start) begin
        done <= 1'b0;
        left <= QB[CNT_W-1:0];
        rem  <= {1'b0, nz[DW+QB-1:QB]};
        den  <= d;
        q    <= nz[QB-1:0];
    end else if (left != {CNT_W{1'b0}}) begin
        rem  <= sum[DW+1:1];
        q    <= {q[QB-2:0], ~sum[DW+1]};
        left <= left - 1'b1;
        done <= (left == {{(CNT_W-1){1'b0}}, 1'b1});
    end
end

endmodule

`resetall
