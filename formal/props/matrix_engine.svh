// Formal invariants of a matrix-vector engine top (int8_engine, ternary_engine, mv_engine,
// q4_engine; included inside the module by generators/formal.py): the FIFO writes still in
// flight fit the result FIFO (docs/formal.md). A write is decided in the controller (a row's
// last beat: a result; tlast: the status word) and reaches the FIFO the engine's latency later;
// with the lane's 16 stages the pipeline is longer than the induction depth, so the proof
// counts the writes in flight from the stages' registers instead:
//   in the input register   a beat in a row that ends it (st_row && row_last_q), a tlast beat
//   stage 1                 s1_valid && s1_last, eof_d
//   stage 2 (lane_*)        lane_valid && lane_last, s1_eof
//   then                    lane_eof, and every stage of the back end's sideband delay whose
//                           write bit is set (delay_line's f_top_ctrl)
// matrix_writes_fit: count + writes in flight <= depth (no overflow, whatever the output);
// matrix_room_fit: while the registered room flag is high, two more fit (the writes of one more
// accepted beat). The FIFO margin (latency + 5) makes the second inductive stage by stage.
//! modules: int8_engine ternary_engine mv_engine q4_engine
//! if-source-matches: mv_stream_ctrl
//! xmr f_me_in_v = ctrl.in_v
//! xmr f_me_in_l = ctrl.in_l
//! xmr f_me_st_row = ctrl.st_row
//! xmr f_me_row_last = ctrl.row_last_q
//! xmr f_me_eof_d = ctrl.eof_d
//! xmr f_me_s1_valid = ctrl.s1_valid
//! xmr f_me_s1_last = ctrl.s1_last
//! xmr f_me_s1_eof = ctrl.s1_eof
//! xmr f_me_dl_writes = back.sideband.f_top_ctrl
//! xmr f_me_count = back.results.count
//! xmr f_me_depth = back.results.f_depth
reg f_me_pv = 1'b0;
always @(posedge aclk) f_me_pv <= 1'b1;
wire [31:0] f_me_pend = {31'd0, f_me_in_v[0] & f_me_in_l[0]}
                      + {31'd0, f_me_in_v[0] & f_me_st_row[0] & f_me_row_last[0]}
                      + {31'd0, f_me_eof_d[0]}
                      + {31'd0, f_me_s1_valid[0] & f_me_s1_last[0]}
                      + {31'd0, f_me_s1_eof[0]}
                      + {31'd0, lane_valid & lane_last}
                      + {31'd0, lane_eof}
                      + f_me_dl_writes;
always @(*) begin
    if (f_me_pv) begin
        matrix_writes_fit: assert (f_me_count + f_me_pend <= f_me_depth);
        matrix_room_fit:   assert (!room || f_me_count + f_me_pend + 2 <= f_me_depth);
    end
end
