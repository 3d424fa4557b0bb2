// Formal invariants of the attention engine generation that takes one frame at a time
// (s_axis_tready low from a frame's tlast until its status word is written; main of
// 2026-11-30). Included by generators/formal.py beside attention_engine.svh only when the
// engine's source has that tready rule:
//! if-source-matches: if \(hs && s_axis_tlast\) begin\s*\n\s*rdy <= 1'b0;
//
// The input side is quiet while the finisher runs: tready (rdy, rinit) and the input
// register's valid only in ph_wait, never while s_fin; after a tlast beat tready is already
// low. Without them the induction starts in s_fin with tready high and a second tlast
// restarts ph_wait beside another phase (att_inv_onehot fails). The back-to-back engine
// (branch `attention`) accepts the next frame while finishing, so these do not hold there and
// are not included; its finisher closes with attention_engine.svh alone.
reg f_att1_pv = 1'b0;
always @(posedge aclk) f_att1_pv <= 1'b1;
always @(*) begin
    if (f_att1_pv) begin
        att_inv_input:         assert (!(rdy || r0v || rinit) || ph_wait);
        att_inv_fin:           assert (ph_wait || s_fin);
        att_inv_fin_input:     assert (!s_fin || !(rdy || r0v || rinit));
        att_inv_tlast:         assert (!(r0v && r0l) || !(rdy || rinit));
    end
end
