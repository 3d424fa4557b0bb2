# Timing gate: run after route_design, before write_bitstream.
#
# A design that misses timing still runs on the board and silently returns wrong answers (the
# write-up's first build missed by 0.502 ns), so any negative slack ends the build here:
#   - setup (WNS) and hold (WHS) slack from get_timing_paths,
#   - pulse-width slack (WPWS) from the design timing summary,
#   - the fabric clock must exist and have the period the design was built for,
#   - no timed paths at all (a missing clock constraint) also fails.
# On failure it prints the worst paths, writes them to timing_failed.rpt and calls `exit 1`.
#
# Usage (open routed design):  timing_gate -report_dir build -clock clk_fpga_0 -period 7.000

namespace eval timing_gate {}

# Parse the "Design Timing Summary" table of report_timing_summary.
# Returns a dict with wns tns whs ths wpws tpws (strings as printed), or an empty dict.
proc timing_gate::parse_summary {text} {
    set lines [split $text "\n"]
    set n [llength $lines]
    for {set i 0} {$i < $n} {incr i} {
        set line [lindex $lines $i]
        if {[string first "WNS(ns)" $line] < 0 || [string first "WPWS(ns)" $line] < 0} {
            continue
        }
        # Header, a line of dashes, then the values (which may start with a minus sign).
        for {set j [expr {$i + 1}]} {$j < $n} {incr j} {
            set row [string trim [lindex $lines $j]]
            if {[regexp {^[-\s]*$} $row]} {
                continue
            }
            set f [regexp -all -inline {\S+} $row]
            if {[llength $f] < 10} {
                return {}
            }
            return [dict create \
                wns [lindex $f 0] tns [lindex $f 1] \
                whs [lindex $f 4] ths [lindex $f 5] \
                wpws [lindex $f 8] tpws [lindex $f 9]]
        }
    }
    return {}
}

# Worst slack of one timing path object, or "" when there is no such path.
proc timing_gate::path_slack {path} {
    if {[llength $path] == 0} {
        return ""
    }
    return [get_property SLACK $path]
}

proc timing_gate::is_number {value} {
    return [string is double -strict $value]
}

proc timing_gate::write_text {path text} {
    set fh [open $path w]
    puts $fh $text
    close $fh
}

proc timing_gate {args} {
    set opts [dict create -report_dir . -clock clk_fpga_0 -period ""]
    foreach {key value} $args {
        if {![dict exists $opts $key]} {
            error "timing_gate: unknown option $key (known: [dict keys $opts])"
        }
        dict set opts $key $value
    }
    set report_dir [dict get $opts -report_dir]
    set clock_name [dict get $opts -clock]
    set period [dict get $opts -period]
    set problems {}

    # The clock the fabric runs on, and its period as timed.
    set clk [get_clocks -quiet $clock_name]
    if {[llength $clk] == 0} {
        lappend problems "clock $clock_name not found: the design was not timed at its fabric clock"
    } elseif {$period ne ""} {
        set got [get_property PERIOD $clk]
        if {![timing_gate::is_number $got] || abs($got - $period) > 0.005} {
            lappend problems "clock $clock_name has period $got ns, expected $period ns"
        }
    }

    # Setup and hold: the single worst path of each.
    set wns [timing_gate::path_slack \
        [get_timing_paths -quiet -setup -max_paths 1 -nworst 1]]
    set whs [timing_gate::path_slack \
        [get_timing_paths -quiet -hold -max_paths 1 -nworst 1]]

    # Pulse width, from the summary (also kept as a report file).
    set summary [report_timing_summary -quiet -no_header -max_paths 10 -return_string]
    timing_gate::write_text [file join $report_dir timing_summary_gate.rpt] $summary
    set table [timing_gate::parse_summary $summary]
    set wpws ""
    if {[dict exists $table wpws]} {
        set wpws [dict get $table wpws]
    }

    set failed_setup 0
    set failed_hold 0
    set failed_pw 0
    if {![timing_gate::is_number $wns]} {
        lappend problems "no setup timing path found (WNS '$wns'): are the clocks constrained?"
        set failed_setup 1
    } elseif {$wns < 0.0} {
        lappend problems "setup slack WNS = $wns ns is negative"
        set failed_setup 1
    }
    if {![timing_gate::is_number $whs]} {
        lappend problems "no hold timing path found (WHS '$whs')"
        set failed_hold 1
    } elseif {$whs < 0.0} {
        lappend problems "hold slack WHS = $whs ns is negative"
        set failed_hold 1
    }
    if {![timing_gate::is_number $wpws]} {
        lappend problems "could not read WPWS from report_timing_summary"
        set failed_pw 1
    } elseif {$wpws < 0.0} {
        lappend problems "pulse-width slack WPWS = $wpws ns is negative"
        set failed_pw 1
    }

    if {[llength $problems] == 0} {
        puts "TIMING GATE PASSED: WNS=$wns ns WHS=$whs ns WPWS=$wpws ns\
            ($clock_name $period ns)"
        return [dict create wns $wns whs $whs wpws $wpws]
    }

    set out "TIMING GATE FAILED: the bitstream is not written.\n"
    foreach problem $problems {
        append out "  - $problem\n"
    }
    if {$failed_setup} {
        append out "\nWorst setup paths:\n"
        append out [report_timing -quiet -delay_type max -max_paths 10 -nworst 1 \
            -sort_by slack -input_pins -return_string]
    }
    if {$failed_hold} {
        append out "\nWorst hold paths:\n"
        append out [report_timing -quiet -delay_type min -max_paths 10 -nworst 1 \
            -sort_by slack -input_pins -return_string]
    }
    if {$failed_pw} {
        append out "\nPulse-width violations:\n"
        append out [report_pulse_width -quiet -all_violators -return_string]
    }
    set failed_rpt [file join $report_dir timing_failed.rpt]
    timing_gate::write_text $failed_rpt $out
    puts $out
    puts "TIMING GATE FAILED (details in $failed_rpt)"
    exit 1
}
