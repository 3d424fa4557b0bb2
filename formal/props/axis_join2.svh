// Formal properties of rtl/axis_join2.v (the overlay's joiner; branch `overlay`), included
// inside the module by generators/formal.py. At most one side is being drained.
reg f_join_pv = 1'b0;
always @(posedge clk) f_join_pv <= 1'b1;
always @(*) begin
    if (f_join_pv) begin
        join_inv_one_drain:   assert (!(drain_a && drain_b));
    end
end
