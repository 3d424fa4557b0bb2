// Formal properties of rtl/mv_backend.v (included inside the module by generators/formal.py).
// The back end writes the FIFO once per cycle: a row result (d_valid && d_last) and an
// end-of-frame status word (d_eof) in the same cycle would lose the row result.
reg f_be_pv = 1'b0;
always @(posedge aclk) f_be_pv <= 1'b1;
always @(*) begin
    if (f_be_pv && aresetn) begin
        backend_one_write_per_cycle: assert (!(wr_res && wr_status));
    end
end
