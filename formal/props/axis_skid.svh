// Formal properties of rtl/axis_skid.v (the overlay's register slice), included inside the
// module by generators/formal.py.
// The two invariants close the induction: a slice holding a word in its temporary register
// is not ready (else the next input overwrites it: a lost word), and a temporary word only
// exists behind an output word (else the output shows a stale register).
reg f_skid_pv = 1'b0;
always @(posedge clk) f_skid_pv <= 1'b1;
always @(*) begin
    if (f_skid_pv) begin
        // an input word goes to the temporary register: s_ready && out_valid && !m_ready
        skid_no_overwrite:    assert (!(s_ready_reg && out_valid && !m_ready && tmp_valid && s_valid));
        skid_inv_ready:       assert (!(s_ready_reg && tmp_valid));
        skid_inv_tmp:         assert (!tmp_valid || out_valid);
    end
end
