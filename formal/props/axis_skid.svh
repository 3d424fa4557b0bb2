// Formal properties of rtl/axis_skid.v (the overlay's register slice; branch `overlay`),
// included inside the module by generators/formal.py. Nothing on main instantiates it yet.
// The two invariants close the induction: a slice holding a word in its temporary register
// is not ready (else the next input overwrites it: a lost word), and a temporary word only
// exists behind an output word (else the output shows a stale register).
reg f_skid_pv = 1'b0;
always @(posedge clk) f_skid_pv <= 1'b1;
always @(*) begin
    if (f_skid_pv) begin
        skid_no_overwrite:    assert (!(in_to_tmp && tmp_valid && s_valid));
        skid_inv_ready:       assert (!(s_ready_reg && tmp_valid));
        skid_inv_tmp:         assert (!tmp_valid || out_valid);
    end
end
