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
