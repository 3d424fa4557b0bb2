// Formal helper of rtl/delay_line.v (included inside the module by generators/formal.py): the
// number of stages, the output register included, whose top control bit (CTRL_W - 1) is set.
// An engine's props count what is in flight through a delay with it (an `//! xmr` line; the
// matrix back end keeps its FIFO writes there: formal/props/matrix_engine.svh).
(* keep *) wire [31:0] f_top_ctrl;
generate
if (DEPTH == 0) begin : f_dl0
    assign f_top_ctrl = 32'd0;
end else begin : f_dl
    integer f_i;
    reg [31:0] f_cnt;
    always @(*) begin
        f_cnt = 32'd0;
        for (f_i = 0; f_i < ((DEPTH > 1) ? DEPTH - 1 : 1); f_i = f_i + 1) begin
            f_cnt = f_cnt + {31'd0, g_regs.stage[f_i][CTRL_W-1]};
        end
        if (DEPTH > 1) begin
            f_cnt = f_cnt + {31'd0, g_regs.g_out.q_r[CTRL_W-1]};
        end
    end
    assign f_top_ctrl = f_cnt;
end
endgenerate
