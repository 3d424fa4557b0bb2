// Formal properties of rtl/mv_backend.v (included inside the module by generators/formal.py).
// The back end writes the FIFO once per cycle: a row result (sb_valid && sb_last) and an
// end-of-frame status word (sb_eof) arriving in the same cycle would lose the row result (the
// write is decided as it enters the sideband delay, which carries one write per cycle).
reg f_be_pv = 1'b0;
always @(posedge aclk) f_be_pv <= 1'b1;
always @(*) begin
    if (f_be_pv && aresetn) begin
        backend_one_write_per_cycle: assert (!(sb_eof && sb_valid && sb_last));
    end
end
// Frames of B vectors (VECTORS > 1): the read side's word index stays inside the entry on
// m_axis (at most its B - 1; zero while there is none), so the words of an entry leave in
// order, each once, and the entry is released with its last word. (VECTORS = 1: widx is 0.)
always @(*) begin
    if (f_be_pv && aresetn) begin
        backend_word_in_entry: assert (out_valid ? widx <= out_nv : widx == 0);
        backend_out_in_order:  assert (!out_second || out_valid);   // the second waits behind one
    end
end
