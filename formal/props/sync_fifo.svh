// Formal properties of rtl/sync_fifo.v, included inside the module by generators/formal.py
// (a textual `bind`: the harness inserts `include "props/sync_fifo.svh"` before its endmodule,
// so these lines see the FIFO's own registers). docs/formal.md explains each one.
//
// fifo_no_overflow is the property ("a write to a full FIFO loses a word"); the fifo_inv_*
// lines are the invariants that let k-induction close: without them the induction step
// starts from unreachable states (count != wr_ptr - rd_ptr, count > DEPTH, vld or one out of
// step with count, room true with the FIFO nearly full) and fails on those.

// the depth as a wire, for the properties of an enclosing module (their "xmr" lines)
(* keep *) wire [31:0] f_depth = DEPTH;

reg f_fifo_pv = 1'b0;
always @(posedge clk) f_fifo_pv <= 1'b1;

always @(*) begin
    if (f_fifo_pv) begin
        fifo_no_overflow:    assert (!(wr_en && count == DEPTH && !do_rd));
        fifo_inv_count:      assert (count == wr_ptr - rd_ptr);
        fifo_inv_bound:      assert (count <= DEPTH);
        // (not in a cycle of the registered reset: the port reset cleared vld a cycle before
        // the rest, which rst_n clears at this edge)
        fifo_inv_valid:      assert (!rst_n || vld == (count != 0));
        fifo_inv_one:        assert (one == (count == 1));
        fifo_inv_room:       assert (!room || count <= DEPTH - MARGIN);
    end
end
