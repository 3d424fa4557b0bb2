# Recording stubs of the Vivado Tcl commands used by vivado/build.tcl and vivado/timing_gate.tcl,
# so that the flow runs under a plain tclsh (no Vivado on CI machines).
#
# Every call appends one JSON line to the file named by $env(STUB_LOG):
#   {"cmd": "set_property", "args": [...], "props": {...}, "objects": [...]}
# ("props"/"objects" only for set_property). Return values, and so the flow's decisions, are set
# through environment variables:
#   STUB_VERSION       version -short                          (default 2020.2)
#   STUB_FCLK0_ACT     CONFIG.PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ (default 142.857132)
#   STUB_WNS, STUB_WHS slack of the worst setup / hold path    (default 0.062 / 0.035; "none":
#                      get_timing_paths finds no path)
#   STUB_WPWS          worst pulse-width slack in the summary  (default 2.750)
#   STUB_CLK_PERIOD    PERIOD of the fabric clock              (default 7.000)
#   STUB_NO_CLOCK      when set, get_clocks finds nothing in the routed design (the runs'
#                      constraints still find their clocks)
#   STUB_NO_PART       when set, get_parts finds nothing
#   STUB_BOARD_PART    what get_board_parts returns            (default: nothing)
#   STUB_RUN_PROGRESS  PROGRESS of every run                   (default 100%)
#   STUB_HWH_LAYOUT    gen (2020.2, default), srcs (older Vivado) or none: where generate_target
#                      puts the hardware handoff
#   STUB_BD_CRITICAL_WARNINGS  extra critical warnings validate_bd_design raises (default 0)
#   STUB_HWH_NO_PARAMS when set, the .hwh has no PARAMETERS (a handoff of another design)
# Like Vivado, the stubs also check what they can:
#   - set_property/get_property of a CONFIG.* name that is not a real parameter of the cell's IP
#     (tests/tcl_stubs/ip_param_names.tcl, with its public sources) is an error;
#   - the block design (bd_model.tcl): the pins and interfaces each cell has for its
#     configuration (a pin it lacks is not matched and a connection to it fails), and what
#     validate_bd_design reports: a clock pin with no clock source [BD 41-758], a clock pin whose
#     own FREQ_HZ or CLK_DOMAIN differs from its source's [BD 41-238], a module reference's
#     stream interface that no clock is associated with [BD 41-967], and an interface net whose
#     two ends differ in FREQ_HZ, CLK_DOMAIN or TDATA_NUM_BYTES [BD 41-237] (an ERROR after
#     build.tcl's set_msg_config); assign_bd_address maps what each master reaches, and
#     generate_target writes a .hwh with each cell's parameters and the register windows;
#   - processing_system7, after every set_property on the cell, raises one CRITICAL WARNING for
#     each negative PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_<lane>, lanes in order, numbered by
#     occurrence: [PSU-1] for the first negative lane, [PSU-2] for the second (lanes 2 and 3
#     negative: [PSU-1] names DELAY_2, [PSU-2] DELAY_3), as public Vivado logs show it
#     (docs/vivado.md, "What the stubs model");
#   - get_msg_config -count -severity S (or -id ID) counts the messages raised in this process;
#   - the constraints: get_clocks knows which clocks exist (the PS7's clk_fpga_<n> of each
#     enabled FCLK, created by the IP's own XDC, which Vivado reads before the user's, then each
#     create_clock as it is read); a name that matches no clock is WARNING [Vivado 12-627] and
#     matches nothing; set_clock_groups with an empty -group is CRITICAL WARNING [Vivado 12-4739]
#     (and with fewer than two groups left, ERROR [Vivado 12-5201]), the constraint dropped;
#   - launch_runs synth_1 / impl_1 reads the constrs_1 files in the order add_files gave them
#     (the run's synth_design / link_design) and writes what they raise to the run's runme.log
#     under its DIRECTORY, not to this process's counts (a run is a sub-process of Vivado);
#     open_run takes the run's clocks. In a run, get_ports knows the block design's external
#     ports: another name is WARNING [Vivado 12-584] and set_property on nothing is CRITICAL
#     WARNING [Common 17-55] (public logs: mapleleavessssssss-wq/vivado-mcp issue 2); a
#     failing STUB_WNS / STUB_WHS puts route_design's CRITICAL WARNING [Timing 38-282] in
#     impl_1's log; STUB_RUN_CRITICAL_WARNINGS=N adds N critical warnings to each run's log.
# Files that Vivado would write (reports with -file, the bitstream, the hwh) are created with
# placeholder text so that the flow's copies and checks run for real.

namespace eval stub {
    variable props
    array set props {}
    # cell -> IP name (create_bd_cell -type ip) or module (-type module -reference)
    variable cell_ip
    array set cell_ip {}
    variable cell_ref
    array set cell_ref {}
    # module,port -> width in bits, from the Verilog files given to add_files
    variable module_ports
    array set module_ports {}
    # messages raised so far, by severity; severity overrides from set_msg_config -id
    variable msg_count
    array set msg_count {{CRITICAL WARNING} 0 ERROR 0}
    variable msg_severity
    array set msg_severity {}
    variable msg_id_count
    array set msg_id_count {}
    variable proj_dir ""
    variable proj_name ""
    variable bd_name ""
    # the clocks that exist (constraints); the constraint files of constrs_1, in read order
    variable clocks {}
    variable constr_files {}
    # while a run is modelled: its runme.log (messages go there, not to msg_count)
    variable run_log ""
    # the block design's external ports (the wrapper's top-level ports, for the runs' XDC)
    variable bd_ports {}
    variable run_clocks
    array set run_clocks {}
    variable ipdef_versions {
        processing_system7 5.5 axi_dma 7.1 axi_interconnect 2.1 proc_sys_reset 5.0
        smartconnect 1.0
    }
}

source [file join [file dirname [file normalize [info script]]] ip_param_names.tcl]

proc stub::env {name default} {
    if {[info exists ::env($name)] && $::env($name) ne ""} {
        return $::env($name)
    }
    return $default
}

proc stub::json_str {s} {
    set map [list \\ \\\\ \" \\\" \n \\n \r \\r \t \\t]
    return "\"[string map $map $s]\""
}

proc stub::json_list {items} {
    set out {}
    foreach item $items {
        lappend out [stub::json_str $item]
    }
    return "\[[join $out {, }]\]"
}

proc stub::record {cmd argl {extra ""}} {
    set line "\{\"cmd\": [stub::json_str $cmd], \"args\": [stub::json_list $argl]$extra\}"
    set fh [open [stub::env STUB_LOG stub_vivado.log] a]
    puts $fh $line
    close $fh
}

# Drop leading -quiet/-verbose flags.
proc stub::strip_flags {argl} {
    while {[llength $argl] > 0 && [lindex $argl 0] in {-quiet -verbose}} {
        set argl [lrange $argl 1 end]
    }
    return $argl
}

# The value of option NAME in an argument list, or DEFAULT.
proc stub::opt {argl name {default ""}} {
    set i [lsearch -exact $argl $name]
    if {$i < 0 || $i + 1 >= [llength $argl]} {
        return $default
    }
    return [lindex $argl [expr {$i + 1}]]
}

# Non-option words of an argument list (options listed in WITH_VALUE take a value).
proc stub::positional {argl {with_value {}}} {
    set out {}
    set skip 0
    foreach a $argl {
        if {$skip} {
            set skip 0
            continue
        }
        if {[string index $a 0] eq "-" && ![string is double -strict $a]} {
            if {$a in $with_value} {
                set skip 1
            }
            continue
        }
        lappend out $a
    }
    return $out
}

proc stub::touch {path text} {
    file mkdir [file dirname $path]
    set fh [open $path w]
    puts $fh $text
    close $fh
}

# Objects named by patterns, as Vivado returns them: block-design paths start with "/".
proc stub::bd_objects {argl} {
    set out {}
    foreach pattern [stub::positional $argl {-of_objects -filter -regexp}] {
        foreach p $pattern {
            if {[string index $p 0] ne "/"} {
                set p "/$p"
            }
            lappend out $p
        }
    }
    return $out
}

# ------------------------------------------------------------------------------------------
# set_property / get_property: a property store, so read-backs see what the flow wrote.
# ------------------------------------------------------------------------------------------
proc set_property {args} {
    set argl [stub::strip_flags $args]
    if {[lindex $argl 0] eq "-dict"} {
        set pairs [lindex $argl 1]
        set objects [lrange $argl 2 end]
    } else {
        set pairs [lrange $argl 0 1]
        set objects [lrange $argl 2 end]
    }
    set flat_objects {}
    foreach o $objects {
        foreach x $o {
            lappend flat_objects $x
        }
    }
    if {[llength $flat_objects] == 0 && $stub::run_log ne ""} {
        # an XDC line whose get_ports found nothing (public logs: [Vivado 12-584] then this)
        stub::raise {CRITICAL WARNING} "Common 17-55" "'set_property' expects at least one\
            object."
        stub::record set_property $args
        return ""
    }
    foreach {name value} $pairs {
        foreach o $flat_objects {
            stub::check_param $o $name set_property
        }
    }
    set props_json {}
    foreach {name value} $pairs {
        lappend props_json "[stub::json_str [string toupper $name]]: [stub::json_str $value]"
        foreach o $flat_objects {
            set stub::props([string toupper $name],$o) $value
        }
    }
    foreach o $flat_objects {
        stub::ps7_checks $o
    }
    set extra ", \"props\": \{[join $props_json {, }]\},"
    append extra " \"objects\": [stub::json_list $flat_objects]"
    stub::record set_property $args $extra
    return ""
}

# A CONFIG.* property of an IP cell must be a real parameter of that IP (ip_param_names.tcl).
proc stub::check_param {obj name cmd} {
    if {![string match -nocase CONFIG.* $name] || ![info exists stub::cell_ip($obj)]} {
        return
    }
    set ip $stub::cell_ip($obj)
    if {![info exists stub::ip_params($ip)]} {
        return
    }
    set param [string range $name 7 end]
    foreach known $stub::ip_params($ip) {
        if {[string equal -nocase $known $param]} {
            return
        }
    }
    stub::raise ERROR "Common 17-69" "$cmd: '$param' is not a parameter of $ip ($obj);\
        see tests/tcl_stubs/ip_param_names.tcl"
    error "$cmd: CONFIG.$param is not a parameter of $ip"
}

# processing_system7 checks its DQS-to-clock delays after every set_property on the cell: one
# CRITICAL WARNING per negative lane, lanes in order, numbered by occurrence (PSU-1, PSU-2, ...),
# not by lane. Public logs: lanes 2, 3 negative give "[PSU-1] ... DELAY_2 ... -0.009" and
# "[PSU-2] ... DELAY_3 ... -0.033", twice for two set_property calls (fpgasystems/spooNN issue
# 14; open-sdr/openwifi-hw issue 102: DELAY_2 -0.009 as PSU-1); all four negative give PSU-1..4
# again after a later `set_property CONFIG.PCW_USE_S_AXI_HP0` (fastmachinelearning/hls4ml
# issue 933; Digilent/vivado-boards issue 20).
proc stub::ps7_checks {obj} {
    if {![info exists stub::cell_ip($obj)] || $stub::cell_ip($obj) ne "processing_system7"} {
        return
    }
    set n 0
    foreach lane {0 1 2 3} {
        set key CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_$lane,$obj
        if {![info exists stub::props($key)]} {
            continue
        }
        set value $stub::props($key)
        if {[string is double -strict $value] && $value < 0} {
            incr n
            stub::raise {CRITICAL WARNING} "PSU-$n" "Parameter :\
                PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_$lane has negative value $value . PS DDR\
                interfaces might fail when entering negative DQS skew values."
        }
    }
}

# Print a Vivado-style message and count it (with the severity set_msg_config gave its id).
proc stub::raise {severity id text} {
    if {[info exists stub::msg_severity($id)]} {
        set severity $stub::msg_severity($id)
    }
    if {$stub::run_log ne ""} {
        set fh [open $stub::run_log a]
        puts $fh "$severity: \[$id\] $text"
        close $fh
        return
    }
    if {[info exists stub::msg_count($severity)]} {
        incr stub::msg_count($severity)
    }
    if {![info exists stub::msg_id_count($id)]} {
        set stub::msg_id_count($id) 0
    }
    incr stub::msg_id_count($id)
    puts "$severity: \[$id\] $text"
}

proc get_property {args} {
    stub::record get_property $args
    set argl [stub::strip_flags $args]
    set name [string toupper [lindex $argl 0]]
    set obj [lindex $argl 1]
    stub::check_param $obj $name get_property
    switch -- $name {
        CONFIG.PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ {
            return [stub::env STUB_FCLK0_ACT 142.857132]
        }
        SLACK {
            if {$obj eq "stub_path_hold"} {
                return [stub::env STUB_WHS 0.035]
            }
            return [stub::env STUB_WNS 0.062]
        }
        PERIOD {
            return [stub::env STUB_CLK_PERIOD 7.000]
        }
        PROGRESS {
            return [stub::env STUB_RUN_PROGRESS 100%]
        }
        DIRECTORY {
            return [file join $stub::proj_dir $stub::proj_name.runs $obj]
        }
        STATUS {
            if {$obj eq "synth_1"} {
                return "synth_design Complete!"
            }
            return "route_design Complete!"
        }
    }
    if {[info exists stub::props($name,$obj)]} {
        return $stub::props($name,$obj)
    }
    # block-design pins: the clock properties after propagation; address segments
    if {$name in {CONFIG.FREQ_HZ CONFIG.CLK_DOMAIN} && ![info exists stub::cell_ip($obj)]} {
        return [stub::pin_value $obj [string range $name 7 end]]
    }
    if {$name in {OFFSET RANGE}} {
        return [stub::segment_property $obj $name]
    }
    return ""
}

# ------------------------------------------------------------------------------------------
# Project, files, runs
# ------------------------------------------------------------------------------------------
proc version {args} {
    stub::record version $args
    return [stub::env STUB_VERSION 2020.2]
}

proc get_parts {args} {
    stub::record get_parts $args
    if {[stub::env STUB_NO_PART ""] ne ""} {
        return ""
    }
    return [lindex [stub::positional $args] 0]
}

proc get_board_parts {args} {
    stub::record get_board_parts $args
    return [stub::env STUB_BOARD_PART ""]
}

proc create_project {args} {
    stub::record create_project $args
    set pos [stub::positional $args {-part}]
    set stub::proj_name [lindex $pos 0]
    set stub::proj_dir [lindex $pos 1]
    return $stub::proj_name
}

proc current_project {args} {
    stub::record current_project $args
    return $stub::proj_name
}

proc current_fileset {args} {
    stub::record current_fileset $args
    return sources_1
}

proc get_files {args} {
    stub::record get_files $args
    set out {}
    foreach pattern [stub::positional $args {-of_objects -filter}] {
        if {[string match *.bd $pattern]} {
            set bd [file rootname [file tail $pattern]]
            lappend out [file join $stub::proj_dir $stub::proj_name.srcs sources_1 bd $bd \
                $bd.bd]
        } else {
            lappend out $pattern
        }
    }
    return $out
}

proc generate_target {args} {
    stub::record generate_target $args
    set layout [stub::env STUB_HWH_LAYOUT gen]
    if {$layout ne "none"} {
        set hwh [file join $stub::proj_dir $stub::proj_name.$layout sources_1 bd \
            $stub::bd_name hw_handoff $stub::bd_name.hwh]
        stub::touch $hwh [stub::hwh_text]
    }
    return ""
}

proc make_wrapper {args} {
    stub::record make_wrapper $args
    return [file join $stub::proj_dir $stub::proj_name.gen sources_1 bd $stub::bd_name hdl \
        ${stub::bd_name}_wrapper.v]
}

proc get_runs {args} {
    stub::record get_runs $args
    return [lindex [stub::positional $args] 0]
}

proc get_ipdefs {args} {
    stub::record get_ipdefs $args
    set pattern [lindex [stub::positional $args {-filter}] 0]
    set name [lindex [split $pattern :] 2]
    if {![dict exists $stub::ipdef_versions $name]} {
        return ""
    }
    return [string map [list * [dict get $stub::ipdef_versions $name]] $pattern]
}

# ------------------------------------------------------------------------------------------
# Block design
# ------------------------------------------------------------------------------------------
proc create_bd_design {args} {
    stub::record create_bd_design $args
    set stub::bd_name [lindex [stub::positional $args {-dir}] 0]
    return $stub::bd_name
}

proc current_bd_design {args} {
    stub::record current_bd_design $args
    return $stub::bd_name
}

proc create_bd_cell {args} {
    stub::record create_bd_cell $args
    set name [lindex [stub::positional $args {-type -vlnv -reference}] 0]
    set type [stub::opt $args -type]
    if {$type eq "ip"} {
        set stub::cell_ip(/$name) [lindex [split [stub::opt $args -vlnv] :] 2]
    } elseif {$type eq "module"} {
        set module [stub::opt $args -reference]
        if {[llength [array names stub::module_ports $module,*]] == 0} {
            stub::raise ERROR "BD 41-1665" "module reference $module: no such module in the\
                sources added to the project"
            error "create_bd_cell: module $module not found"
        }
        set stub::cell_ref(/$name) $module
    }
    return "/$name"
}

proc add_files {args} {
    stub::record add_files $args
    set constrs [expr {[stub::opt $args -fileset] eq "constrs_1"}]
    foreach word [stub::positional $args {-fileset -of_objects}] {
        foreach path $word {
            stub::read_module_ports $path
            if {$constrs || [string match *.xdc $path]} {
                lappend stub::constr_files $path
            }
        }
    }
    return ""
}

proc set_msg_config {args} {
    stub::record set_msg_config $args
    set id [stub::opt $args -id]
    set severity [stub::opt $args -new_severity]
    if {$id ne "" && $severity ne ""} {
        set stub::msg_severity($id) $severity
    }
    return ""
}

proc get_msg_config {args} {
    stub::record get_msg_config $args
    set severity [stub::opt $args -severity]
    set id [stub::opt $args -id]
    if {"-count" in $args && [info exists stub::msg_count($severity)]} {
        return $stub::msg_count($severity)
    }
    if {"-count" in $args && [info exists stub::msg_id_count($id)]} {
        return $stub::msg_id_count($id)
    }
    return 0
}

proc stub::bd_get {cmd args} {
    stub::record $cmd $args
    return [stub::bd_objects $args]
}

foreach cmd {get_bd_cells get_bd_ports get_bd_intf_ports get_bd_nets get_bd_intf_nets} {
    interp alias {} $cmd {} stub::bd_get $cmd
}

# Netlist objects (XDC): the names themselves.
proc stub::netlist_get {cmd args} {
    stub::record $cmd $args
    set out {}
    foreach pattern [stub::positional $args {-of_objects -filter}] {
        foreach p $pattern {
            lappend out $p
        }
    }
    return $out
}

foreach cmd {get_pins get_cells get_nets} {
    interp alias {} $cmd {} stub::netlist_get $cmd
}

# get_ports: in a run, the top's ports are the block design's external ports (the wrapper's):
# a name that matches none is WARNING [Vivado 12-584] No ports matched '<name>' and matches
# nothing (then set_property on it is [Common 17-55], below). Outside a run: the names.
proc get_ports {args} {
    stub::record get_ports $args
    set out {}
    foreach pattern [stub::positional $args {-of_objects -filter}] {
        foreach p $pattern {
            if {$stub::run_log eq ""} {
                lappend out $p
                continue
            }
            set hits {}
            foreach port $stub::bd_ports {
                if {[string match $p $port]} {
                    lappend hits $port
                }
            }
            if {[llength $hits] == 0} {
                stub::raise WARNING "Vivado 12-584" "No ports matched '$p'."
            }
            set out [concat $out $hits]
        }
    }
    return $out
}

proc current_design {args} {
    stub::record current_design $args
    return $stub::bd_name
}

proc create_bd_intf_port {args} {
    stub::record create_bd_intf_port $args
    set name [lindex [stub::positional $args {-mode -vlnv}] 0]
    lappend stub::bd_ports $name
    return "/$name"
}

# ------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------
# The clocks that exist: only those (glob patterns match them, as in Vivado). A pattern that
# matches none: WARNING [Vivado 12-627] No clocks matched '<pattern>' (litex issue 2227,
# litepcie issue 113 logs), and nothing. -include_generated_clocks adds nothing here: the
# flow makes no generated clocks.
proc get_clocks {args} {
    stub::record get_clocks $args
    if {[stub::env STUB_NO_CLOCK ""] ne "" && $stub::run_log eq ""} {
        return ""
    }
    set out {}
    foreach pattern [stub::positional $args {-of_objects -filter}] {
        foreach p $pattern {
            set hits {}
            foreach c $stub::clocks {
                if {[string match $p $c]} {
                    lappend hits $c
                }
            }
            if {[llength $hits] == 0 && "-quiet" ni $args} {
                stub::raise WARNING "Vivado 12-627" "No clocks matched '$p'."
            }
            set out [concat $out $hits]
        }
    }
    return $out
}

# The clocks IP XDC files create before the user's XDC is read (Vivado's own record of a run's
# constraints, .Xil/<top>_propImpl.xdc, lists processing_system7's XDC "order:EARLY" before the
# user's files: Torchet/CochetLPSC, link-ngen/GameOfLife; docs/vivado.md): processing_system7's
# create_clock of clk_fpga_<n> for each enabled FCLK_CLK<n> with its port.
proc stub::ip_clocks {} {
    set out {}
    foreach cell [lsort [array names stub::cell_ip]] {
        if {$stub::cell_ip($cell) ne "processing_system7"} {
            continue
        }
        foreach n {0 1 2 3} {
            set en [stub::param $cell PCW_FPGA_FCLK${n}_ENABLE]
            set port [stub::param $cell PCW_EN_CLK${n}_PORT]
            if {[stub::is_on $en] && [stub::is_on $port]} {
                lappend out clk_fpga_$n
            }
        }
    }
    return $out
}

proc create_clock {args} {
    stub::record create_clock $args
    set name [stub::opt $args -name]
    if {$name eq ""} {
        set name [lindex [stub::positional $args {-name -period -waveform}] 0]
    }
    if {$name ni $stub::clocks} {
        lappend stub::clocks $name
    }
    return $name
}

# set_clock_groups: each -group must name clocks that exist. An empty group: CRITICAL WARNING
# [Vivado 12-4739] "set_clock_groups:No valid object(s) found for '-group ...'", then, fewer
# than two non-empty groups left, [Vivado 12-5201] "cannot set the clock group when only one
# non-empty group remains" (enjoy-digital/litepcie issue 113, an ERROR in 2018.x and 2023.2;
# enjoy-digital/litex issue 2227): the constraint is dropped.
proc set_clock_groups {args} {
    stub::record set_clock_groups $args
    set groups {}
    for {set i 0} {$i < [llength $args]} {incr i} {
        if {[lindex $args $i] eq "-group"} {
            incr i
            lappend groups [lindex $args $i]
        }
    }
    set full 0
    foreach g $groups {
        if {[llength $g] == 0} {
            stub::raise {CRITICAL WARNING} "Vivado 12-4739" "set_clock_groups:No valid\
                object(s) found for '-group $g'."
        } else {
            incr full
        }
    }
    if {$full < 2} {
        stub::raise ERROR "Vivado 12-5201" "set_clock_groups: cannot set the clock group when\
            only one non-empty group remains."
        return ""
    }
    return ""
}

# A run (synth_1, impl_1): its synth_design / link_design reads the IP's clocks, then the
# constrs_1 files in the order they were added; what they raise goes to DIRECTORY/runme.log.
proc stub::run_constraints {run} {
    set dir [file join $stub::proj_dir $stub::proj_name.runs $run]
    file mkdir $dir
    set stub::run_log [file join $dir runme.log]
    set fh [open $stub::run_log w]
    puts $fh "*** Running vivado (stub)\n    with args -log $run.log -mode batch"
    close $fh
    set saved $stub::clocks
    set stub::clocks [stub::ip_clocks]
    foreach xdc $stub::constr_files {
        set fh [open $stub::run_log a]
        puts $fh "Parsing XDC File \[$xdc\]"
        close $fh
        if {[catch {uplevel #0 [list source $xdc]} msg]} {
            stub::raise ERROR "Common 17-69" "Command failed: $msg \[$xdc\]"
        }
        set fh [open $stub::run_log a]
        puts $fh "Finished Parsing XDC File \[$xdc\]"
        close $fh
    }
    # route_design's own timing summary: a failing design is CRITICAL WARNING [Timing 38-282]
    # in the implementation run's log (ptrkrysik/uhd issue 3)
    if {$run eq "impl_1"} {
        foreach v [list [stub::env STUB_WNS 0.062] [stub::env STUB_WHS 0.035]] {
            if {[string is double -strict $v] && $v < 0} {
                stub::raise {CRITICAL WARNING} "Timing 38-282" "The design failed to meet the\
                    timing requirements. Please see the timing summary report for details on\
                    the timing violations."
                break
            }
        }
    }
    for {set i 0} {$i < [stub::env STUB_RUN_CRITICAL_WARNINGS 0]} {incr i} {
        stub::raise {CRITICAL WARNING} "Constraints 18-5210" "stub critical warning\
            [expr {$i + 1}] of $run"
    }
    set fh [open $stub::run_log a]
    puts $fh [expr {
        $run eq "synth_1" ? "synth_design completed successfully"
        : "route_design completed successfully"
    }]
    close $fh
    set stub::run_clocks($run) $stub::clocks
    set stub::clocks $saved
    set stub::run_log ""
}

proc launch_runs {args} {
    stub::record launch_runs $args
    foreach run [stub::positional $args {-jobs -to_step -next_step}] {
        stub::run_constraints $run
    }
    return ""
}

# open_run loads the run's checkpoint, with the clocks its constraints made.
proc open_run {args} {
    stub::record open_run $args
    set run [lindex [stub::positional $args {-name}] 0]
    if {[info exists stub::run_clocks($run)]} {
        set stub::clocks $stub::run_clocks($run)
    }
    return ""
}

proc get_timing_paths {args} {
    stub::record get_timing_paths $args
    if {"-hold" in $args || [stub::opt $args -delay_type] in {min min_max}} {
        if {[stub::env STUB_WHS 0.035] eq "none"} {
            return ""
        }
        return stub_path_hold
    }
    if {[stub::env STUB_WNS 0.062] eq "none"} {
        return ""
    }
    return stub_path_setup
}

proc stub::timing_summary_text {} {
    set wns [stub::env STUB_WNS 0.062]
    set whs [stub::env STUB_WHS 0.035]
    set wpws [stub::env STUB_WPWS 2.750]
    foreach v {wns whs} {
        if {[set $v] eq "none"} {
            set $v inf
        }
    }
    set head [format "%11s  %11s  %21s  %19s  %11s  %11s  %21s  %19s  %11s  %11s  %22s  %20s" \
        WNS(ns) TNS(ns) "TNS Failing Endpoints" "TNS Total Endpoints" \
        WHS(ns) THS(ns) "THS Failing Endpoints" "THS Total Endpoints" \
        WPWS(ns) TPWS(ns) "TPWS Failing Endpoints" "TPWS Total Endpoints"]
    set dash [format "%11s  %11s  %21s  %19s  %11s  %11s  %21s  %19s  %11s  %11s  %22s  %20s" \
        ------- ------- --------------------- ------------------- \
        ------- ------- --------------------- ------------------- \
        -------- -------- ---------------------- --------------------]
    set vals [format "%11s  %11s  %21s  %19s  %11s  %11s  %21s  %19s  %11s  %11s  %22s  %20s" \
        $wns 0.000 0 21423 $whs 0.000 0 21423 $wpws 0.000 0 9114]
    set rule [string repeat - 96]
    return [join [list \
        $rule "| Design Timing Summary" "| ---------------------" $rule "" \
        $head $dash $vals "" "" "All user specified timing constraints are met (stub)."] "\n"]
}

proc stub::report {cmd argl text} {
    stub::record $cmd $argl
    set file [stub::opt $argl -file]
    if {$file ne ""} {
        stub::touch $file $text
    }
    if {"-return_string" in $argl} {
        return $text
    }
    return ""
}

proc report_timing_summary {args} {
    return [stub::report report_timing_summary $args [stub::timing_summary_text]]
}

proc report_timing {args} {
    set type [stub::opt $args -delay_type max]
    set slack [expr {$type eq "min" ? [stub::env STUB_WHS 0.035] : [stub::env STUB_WNS 0.062]}]
    set text "Timing Report (stub)\nSlack: $slack ns ($type)\n  Source: engine_0/x_reg\n"
    return [stub::report report_timing $args $text]
}

proc report_pulse_width {args} {
    return [stub::report report_pulse_width $args \
        "Pulse Width Checks (stub)\nWPWS: [stub::env STUB_WPWS 2.750] ns\n"]
}

proc stub::plain_report {cmd args} {
    return [stub::report $cmd $args "$cmd (stub)"]
}

foreach cmd {report_utilization report_clocks report_drc report_power report_methodology
    report_ip_status report_clock_utilization} {
    interp alias {} $cmd {} stub::plain_report $cmd
}

# ------------------------------------------------------------------------------------------
# Outputs
# ------------------------------------------------------------------------------------------
proc write_bitstream {args} {
    stub::record write_bitstream $args
    stub::touch [lindex [stub::positional $args {-bin_file}] end] "stub bitstream"
    return ""
}

proc write_hw_platform {args} {
    stub::record write_hw_platform $args
    stub::touch [stub::opt $args -file] "stub xsa"
    return ""
}

# ------------------------------------------------------------------------------------------
# Everything else: record and return nothing.
# ------------------------------------------------------------------------------------------
proc stub::record_only {cmd args} {
    stub::record $cmd $args
    return ""
}

foreach cmd {import_files update_compile_order update_ip_catalog
    disconnect_bd_net apply_bd_automation save_bd_design close_bd_design open_bd_design
    regenerate_bd_layout wait_on_run reset_run close_project} {
    interp alias {} $cmd {} stub::record_only $cmd
}

# The block-design model: pins, nets, clock propagation, validate_bd_design, addresses, .hwh.
source [file join [file dirname [file normalize [info script]]] bd_model.tcl]
