// Formal properties of the attention engine, bound in rtl/attention_core.v (included inside
// the module by generators/formal.py; docs/formal.md): finisher phases ph_*, result counters
// fg/fb/fh, ycnt/ydone, zg, registered FIFO write.
//
// Why the attention engine needs its own invariant: its finisher checks `room` once (phase
// ph_room), long before its last write (NY result words, G scale words and the status word
// follow over about NY + 20 cycles). The FIFO invariants alone leave the induction step free
// to start in the middle of the finisher with a nearly full FIFO; the proof then "finds" an
// overflow from a state no run reaches. The invariant below counts the writes still to come
// (f_left) from the finisher's state and bounds count + f_left by the depth.
//
// The FIFO's count and depth live in the sync_fifo instance: the harness declares the two
// wires below (32 bits) and connects them after flattening (the "xmr" lines; yosys has no
// hierarchical references).
//! xmr f_fifo_count = out_fifo.count
//! xmr f_fifo_depth = out_fifo.f_depth
localparam F_QB    = 8;                  // the y dividers' quotient bits (pipeline QB + 1)
localparam F_WPB   = NY / (G * RB);      // result words per beat of a row (fh counts them)

reg f_att_pv = 1'b0;
always @(posedge aclk) f_att_pv <= 1'b1;

// a shadow of the y divider's valid pipeline (yk[0].ydiv.v[0..QB]): its output is asserted
// equal to that divider's out_valid (yv0), so with k > QB + 1 the induction step knows what is in flight there
reg [F_QB:0] f_ysr;
always @(posedge aclk) begin
    f_ysr <= {f_ysr[F_QB-1:0], y1v};
    if (!aresetn) f_ysr <= {(F_QB+1){1'b0}};
end

function automatic [15:0] f_pop(input [F_QB:0] x);
    integer i;
    begin
        f_pop = 16'd0;
        for (i = 0; i <= F_QB; i = i + 1) f_pop = f_pop + x[i];
    end
endfunction

// y words in flight (issued, not yet counted by ycnt) and still to issue in ph_y
wire [15:0] f_inflight = {15'd0, y1v} + f_pop(f_ysr) + {15'd0, yr1v} + {15'd0, yreg_v};
wire [15:0] f_issued   = (fg * RB + fb) * F_WPB + fh;
wire [15:0] f_to_issue = ph_y ? (NY - f_issued) : 16'd0;
wire        f_fin_busy = ph_y || ph_zw || ph_zout || ph_stat;
wire [15:0] f_left = {15'd0, wr_en}
                   + f_inflight + f_to_issue
                   + ((ph_y || ph_zw) ? G : ph_zout ? (G - zg) : 16'd0)
                   + (f_fin_busy ? 16'd1 : 16'd0);
wire [5:0]  f_phases = {ph_wait, ph_room, ph_y, ph_zw, ph_zout, ph_stat};

always @(*) begin
    if (f_att_pv) begin
        // the property: every word still to come fits in the FIFO
        att_writes_fit:        assert (f_fifo_count + f_left <= f_fifo_depth);
        // no word is dropped by the write mux (one source per cycle)
        att_one_write_per_cycle: assert (!(yv && (z_write || st_write)) && !(z_write && st_write));
        // invariants that close the induction
        att_inv_onehot:        assert (f_phases != 0 && (f_phases & (f_phases - 1)) == 0);
        att_inv_ypipe:         assert (yv0 == f_ysr[F_QB]);
        att_inv_zstart:        assert (!zstart || (ph_y && f_issued == 0 && f_inflight == 0));
        att_inv_counters:      assert (!ph_y || (fg < G && fb < RB && fh < F_WPB));
        att_inv_ycount:        assert (!(ph_y || ph_zw) || zstart
                                       || (ydone ? (f_inflight + f_to_issue == 0)
                                                 : (ycnt + f_inflight + f_to_issue == NY)));
        att_inv_yidle:         assert ((ph_y || ph_zw) || f_inflight == 0);
        att_inv_zout:          assert (!ph_zout || zg < G);
    end
end
