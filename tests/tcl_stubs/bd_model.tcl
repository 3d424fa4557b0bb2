# A model of the IP integrator block design for the Vivado stubs (vivado_stubs.tcl sources it):
# which pins and interfaces each cell has for its configuration, the nets the flow connects, the
# clock properties IP integrator propagates along them, what validate_bd_design reports, the
# address map assign_bd_address makes, and the .hwh generate_target writes.
#
# What it raises is what Vivado raises, with Vivado's IDs and texts (public Vivado logs quoted in
# tests/vivado/test_vivado_tcl.py):
#   get_bd_pins / get_bd_intf_pins of a pin the cell does not have (for its configuration):
#       WARNING [BD 5-235] No pins matched 'get_bd_pins X' / [BD 5-232] No interface pins
#       matched 'get_bd_intf_pins X', and the object is left out;
#   connect_bd_net with fewer than two objects: ERROR [BD 41-701]; connect_bd_intf_net with
#       fewer than two: ERROR [BD 5-106] (both fail the command);
#   validate_bd_design:
#     ERROR [BD 41-758] a clock pin of a cell on no net from a clock source;
#     CRITICAL WARNING [BD 41-238] Port/Pin property FREQ_HZ (or CLK_DOMAIN) does not match
#       between a clock pin that declares a value of its own and the source driving it;
#     CRITICAL WARNING [BD 41-967] a module reference's AXI interface pin that no clock pin is
#       associated with (it then has IP integrator's default FREQ_HZ, 100000000);
#     CRITICAL WARNING [BD 41-237] Bus Interface property FREQ_HZ, CLK_DOMAIN or TDATA_NUM_BYTES
#       does not match between the two ends of an interface net (slave first);
#     ERROR [Common 17-39] 'validate_bd_design' failed due to earlier errors (after any ERROR).
#
# Propagation, as IP integrator does it: a clock source (FCLK_CLK0 of processing_system7, a
# block-design port made with -type clk -freq_hz) gives FREQ_HZ and CLK_DOMAIN to the clock pins
# on its net; a pin that declares its own value (a module reference's X_INTERFACE_PARAMETER on
# the port, or CONFIG.FREQ_HZ set on the pin) keeps it and is compared with the source. An
# interface takes the values of the clock pin it is associated with (IP cells: the clock of that
# interface in the IP's port list; module references: the clock whose ASSOCIATED_BUSIF names it,
# or, when the module's only clock declares no ASSOCIATED_BUSIF, that clock, as Vivado's
# interface inference does) unless it declares its own. FCLK_CLK0's FREQ_HZ is the PS7's actual
# frequency (CONFIG.PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ, i.e. STUB_FCLK0_ACT, x 1e6) and its
# CLK_DOMAIN <bd>_<cell>_0_FCLK_CLK0, as in Vivado-generated wrappers of PYNQ designs.
#
# The cells modelled are those the flow creates: processing_system7, axi_dma, axi_interconnect,
# proc_sys_reset and module references. A cell of another IP accepts any pin.

namespace eval stub {
    # module,port -> attribute text of the port (X_INTERFACE_INFO, X_INTERFACE_PARAMETER)
    variable module_info
    array set module_info {}
    variable module_param
    array set module_param {}
    # module,port -> input or output
    variable module_dir
    array set module_dir {}
    # nets: pin -> net id; net id -> its pins, the driver first (the flow names it first)
    variable pin_net
    array set pin_net {}
    variable net_pins
    array set net_pins {}
    variable net_count 0
    # interface nets: pin -> the pin at the other end
    variable intf_peer
    array set intf_peer {}
    # block-design ports made with -type clk: port -> FREQ_HZ
    variable clk_port
    array set clk_port {}
    # address map: address space -> {segment offset range target} ...
    variable space_segs
    array set space_segs {}

    # IP parameter defaults the model needs when the flow does not set a parameter (the values
    # of the IP catalogue; PYNQ's own Tcl sets c_include_sg {0} and c_sg_include_stscntrl_strm
    # {0} explicitly because the defaults are 1)
    variable ip_defaults {
        axi_dma {
            c_include_sg 1 c_sg_include_stscntrl_strm 1 c_sg_length_width 14 c_micro_dma 0
            c_include_mm2s 1 c_include_s2mm 1 c_m_axis_mm2s_tdata_width 32
            c_s_axis_s2mm_tdata_width 32 c_m_axi_mm2s_data_width 32 c_m_axi_s2mm_data_width 32
        }
        axi_interconnect {NUM_SI 1 NUM_MI 2}
        processing_system7 {
            PCW_USE_M_AXI_GP0 1 PCW_USE_S_AXI_HP0 0 PCW_USE_S_AXI_HP1 0 PCW_USE_S_AXI_HP2 0
            PCW_USE_S_AXI_HP3 0 PCW_USE_S_AXI_GP0 0 PCW_USE_S_AXI_GP1 0 PCW_USE_S_AXI_ACP 0
            PCW_FPGA_FCLK0_ENABLE 1 PCW_EN_CLK0_PORT 1 PCW_EN_RST0_PORT 1
        }
    }
    # IP integrator's FREQ_HZ for an interface or pin with no clock behind it
    variable default_freq_hz 100000000
}

# A CONFIG parameter of an IP cell: the value set on it, else the IP's default.
proc stub::param {cell name} {
    set key CONFIG.[string toupper $name]
    if {[info exists stub::props($key,$cell)]} {
        return $stub::props($key,$cell)
    }
    set ip $stub::cell_ip($cell)
    if {[dict exists $stub::ip_defaults $ip]} {
        foreach {n v} [dict get $stub::ip_defaults $ip] {
            if {[string equal -nocase $n $name]} {
                return $v
            }
        }
    }
    return ""
}

proc stub::is_on {value} {
    return [expr {[string is true -strict $value] || $value eq "1"}]
}

# "KEY value, KEY value" (X_INTERFACE_PARAMETER) -> dict
proc stub::interface_params {text} {
    set out [dict create]
    foreach item [split $text ","] {
        set item [string trim $item]
        if {$item eq ""} {
            continue
        }
        set key [lindex [split $item " "] 0]
        dict set out $key [string trim [string range $item [string length $key] end]]
    }
    return $out
}

# Ports, widths and interface attributes of the modules in a Verilog file (ANSI headers, literal
# [N:0] ranges; attributes may stand on the lines before the port, comments between them).
proc stub::read_module_ports {path} {
    if {![string match *.v $path] || ![file exists $path]} {
        return
    }
    set fh [open $path]
    set text [read $fh]
    close $fh
    set module ""
    set attrs ""
    foreach line [split $text "\n"] {
        if {[regexp {^\s*module\s+([A-Za-z_][A-Za-z0-9_$]*)} $line -> name]} {
            set module $name
            set stub::module_ports($module,) 0
            set attrs ""
            continue
        }
        if {$module eq ""} {
            continue
        }
        set code [string trim $line]
        if {[string match //* $code] || [string match /\** $code]} {
            continue
        }
        append attrs " " [join [regexp -all -inline {\(\*.*?\*\)} $code] " "]
        set re {^\s*(?:\(\*.*\*\)\s*)*(input|output)\s+(?:wire\s+|reg\s+)?}
        append re {(?:\[\s*(\d+)\s*:\s*0\s*\]\s*)?([A-Za-z_][A-Za-z0-9_$]*)}
        if {[regexp $re $line -> dir msb port]} {
            set stub::module_ports($module,$port) [expr {$msb eq "" ? 1 : $msb + 1}]
            set stub::module_dir($module,$port) $dir
            if {[regexp {X_INTERFACE_INFO\s*=\s*"([^"]*)"} $attrs -> info]} {
                set stub::module_info($module,$port) $info
            }
            if {[regexp {X_INTERFACE_PARAMETER\s*=\s*"([^"]*)"} $attrs -> param]} {
                set stub::module_param($module,$port) $param
            }
            set attrs ""
        } elseif {$code ne "" && ![string match (\** $code]} {
            set attrs ""
        }
    }
}

proc stub::module_port_names {module} {
    set out {}
    foreach key [array names stub::module_ports $module,*] {
        set port [string range $key [string length $module,] end]
        if {$port ne ""} {
            lappend out $port
        }
    }
    return [lsort $out]
}

# ------------------------------------------------------------------------------------------
# The pins of a cell for its configuration
# ------------------------------------------------------------------------------------------
# A dict: clocks (clock input pins that need a source), sources (clock output pin -> {FREQ_HZ
# CLK_DOMAIN}), pins (other pins), intfs (interface -> {clock C mode slave|master user {..}}),
# spaces (address space -> master interface), segs (slave interface -> {segment range}), or ""
# for a cell that is not modelled.
proc stub::cell_model {cell} {
    if {[info exists stub::cell_ref($cell)]} {
        return [stub::module_model $cell $stub::cell_ref($cell)]
    }
    if {![info exists stub::cell_ip($cell)]} {
        return ""
    }
    set m [dict create clocks {} sources {} pins {} intfs {} spaces {} segs {}]
    switch -- $stub::cell_ip($cell) {
        processing_system7 {
            dict set m intfs DDR [dict create clock "" mode master user {}]
            dict set m intfs FIXED_IO [dict create clock "" mode master user {}]
            if {[stub::is_on [stub::param $cell PCW_USE_M_AXI_GP0]]} {
                stub::add_intf m M_AXI_GP0 M_AXI_GP0_ACLK master
                dict set m spaces Data M_AXI_GP0
            }
            foreach {use intf seg} {
                PCW_USE_S_AXI_HP0 S_AXI_HP0 HP0_DDR_LOWOCM
                PCW_USE_S_AXI_HP1 S_AXI_HP1 HP1_DDR_LOWOCM
                PCW_USE_S_AXI_HP2 S_AXI_HP2 HP2_DDR_LOWOCM
                PCW_USE_S_AXI_HP3 S_AXI_HP3 HP3_DDR_LOWOCM
                PCW_USE_S_AXI_GP0 S_AXI_GP0 GP0_DDR_LOWOCM
                PCW_USE_S_AXI_GP1 S_AXI_GP1 GP1_DDR_LOWOCM
                PCW_USE_S_AXI_ACP S_AXI_ACP ACP_DDR_LOWOCM
            } {
                if {[stub::is_on [stub::param $cell $use]]} {
                    stub::add_intf m $intf ${intf}_ACLK slave
                    # the PYNQ-Z1's 512 MB of DDR, seen from the PL at 0 (PYNQ's base.tcl)
                    dict set m segs $intf [list $seg 512M]
                }
            }
            if {
                [stub::is_on [stub::param $cell PCW_FPGA_FCLK0_ENABLE]]
                && [stub::is_on [stub::param $cell PCW_EN_CLK0_PORT]]
            } {
                set act [stub::env STUB_FCLK0_ACT 142.857132]
                set hz $stub::default_freq_hz
                if {[string is double -strict $act]} {
                    set hz [expr {round($act * 1e6)}]
                }
                dict set m sources FCLK_CLK0 [dict create FREQ_HZ $hz \
                    CLK_DOMAIN ${stub::bd_name}_[string range $cell 1 end]_0_FCLK_CLK0]
            }
            if {[stub::is_on [stub::param $cell PCW_EN_RST0_PORT]]} {
                dict lappend m pins FCLK_RESET0_N
            }
        }
        axi_dma {
            set sg [stub::is_on [stub::param $cell c_include_sg]]
            set sts [expr {$sg && [stub::is_on [stub::param $cell c_sg_include_stscntrl_strm]]}]
            stub::add_intf m S_AXI_LITE s_axi_lite_aclk slave
            dict set m segs S_AXI_LITE [list Reg 64K]
            dict lappend m pins axi_resetn
            if {$sg} {
                stub::add_intf m M_AXI_SG m_axi_sg_aclk master
                dict set m spaces Data_SG M_AXI_SG
            }
            # per channel: its parameter, memory master, stream, stream direction, SG stream
            foreach {chan mm axis mode sgs} {
                mm2s MM2S M_AXIS_MM2S master M_AXIS_CNTRL s2mm S2MM S_AXIS_S2MM slave S_AXIS_STS
            } {
                if {![stub::is_on [stub::param $cell c_include_$chan]]} {
                    continue
                }
                stub::add_intf m M_AXI_$mm m_axi_${chan}_aclk master
                stub::add_intf m $axis m_axi_${chan}_aclk $mode
                dict set m spaces Data_$mm M_AXI_$mm
                dict lappend m pins ${chan}_introut ${chan}_prmry_reset_out_n
                if {$sts} {
                    stub::add_intf m $sgs m_axi_${chan}_aclk $mode
                }
            }
        }
        axi_interconnect {
            dict lappend m clocks ACLK
            dict lappend m pins ARESETN
            foreach {side mode} {S slave M master} {
                for {set i 0} {$i < [stub::param $cell NUM_${side}I]} {incr i} {
                    set n [format %s%02d $side $i]
                    stub::add_intf m ${n}_AXI ${n}_ACLK $mode
                    dict lappend m pins ${n}_ARESETN
                }
            }
        }
        proc_sys_reset {
            dict lappend m clocks slowest_sync_clk
            dict lappend m pins ext_reset_in aux_reset_in mb_debug_sys_rst dcm_locked \
                mb_reset bus_struct_reset peripheral_reset interconnect_aresetn \
                peripheral_aresetn
        }
        default {
            return ""
        }
    }
    return $m
}

proc stub::add_intf {model_var intf clock mode} {
    upvar 1 $model_var m
    if {$clock ni [dict get $m clocks]} {
        dict lappend m clocks $clock
    }
    dict set m intfs $intf [dict create clock $clock mode $mode user {}]
}

# A module reference: its clock ports (X_INTERFACE_INFO ...signal:clock..., or named clk, aclk,
# *_clk, *_aclk), one AXI-Stream interface per *_tdata port, associated as Vivado does.
proc stub::module_model {cell module} {
    set m [dict create clocks {} sources {} pins {} intfs {} spaces {} segs {} user {}]
    set ports [stub::module_port_names $module]
    set intfs {}
    foreach port $ports {
        if {[regexp {^(.*)_tdata$} $port -> intf]} {
            lappend intfs $intf
        }
    }
    set clocks {}
    foreach port $ports {
        set info ""
        if {[info exists stub::module_info($module,$port)]} {
            set info $stub::module_info($module,$port)
        }
        if {
            $stub::module_dir($module,$port) eq "input"
            && ([string match *signal:clock* $info] || [regexp {^(.*_)?a?clk$} $port])
        } {
            lappend clocks $port
        }
    }
    dict set m clocks $clocks
    set assoc [dict create]
    foreach clk $clocks {
        set params [dict create]
        if {[info exists stub::module_param($module,$clk)]} {
            set params [stub::interface_params $stub::module_param($module,$clk)]
        }
        foreach key {FREQ_HZ CLK_DOMAIN} {
            if {[dict exists $params $key]} {
                dict set m user $clk $key [dict get $params $key]
            }
        }
        if {[dict exists $params ASSOCIATED_BUSIF]} {
            foreach intf [split [dict get $params ASSOCIATED_BUSIF] :] {
                dict set assoc $intf $clk
            }
        } elseif {[llength $clocks] == 1} {
            # Vivado's inference: [IP_Flow 19-4728] adds ASSOCIATED_BUSIF to the only clock
            foreach intf $intfs {
                dict set assoc $intf $clk
            }
        }
    }
    foreach intf $intfs {
        set mode [expr {$stub::module_dir($module,${intf}_tdata) eq "input" ? "slave" : "master"}]
        set user [dict create]
        foreach port $ports {
            if {
                [string match ${intf}_* $port]
                && [info exists stub::module_param($module,$port)]
            } {
                set params [stub::interface_params $stub::module_param($module,$port)]
                foreach key {FREQ_HZ CLK_DOMAIN} {
                    if {[dict exists $params $key]} {
                        dict set user $key [dict get $params $key]
                    }
                }
            }
        }
        set clock ""
        if {[dict exists $assoc $intf]} {
            set clock [dict get $assoc $intf]
        }
        dict set m intfs $intf [dict create clock $clock mode $mode user $user]
    }
    foreach port $ports {
        set in_intf 0
        foreach intf $intfs {
            if {[string match ${intf}_* $port]} {
                set in_intf 1
            }
        }
        if {!$in_intf && $port ni $clocks} {
            dict lappend m pins $port
        }
    }
    return $m
}

# Does cell/pin exist? KIND is pin or intf. A cell that is not modelled has every pin.
proc stub::has {path kind} {
    set cell [file dirname $path]
    set name [file tail $path]
    set m [stub::cell_model $cell]
    if {$m eq ""} {
        return 1
    }
    if {$kind eq "intf"} {
        return [dict exists $m intfs $name]
    }
    return [expr {
        $name in [dict get $m clocks] || $name in [dict get $m pins]
        || [dict exists $m sources $name]
    }]
}

# ------------------------------------------------------------------------------------------
# Commands: pins, nets
# ------------------------------------------------------------------------------------------
proc stub::get_pins_of {cmd kind id what argl} {
    stub::record $cmd $argl
    set out {}
    foreach obj [stub::bd_objects $argl] {
        if {[stub::has $obj $kind]} {
            lappend out $obj
        } elseif {"-quiet" ni $argl} {
            stub::raise WARNING $id "No $what matched '$cmd [string range $obj 1 end]'"
        }
    }
    return $out
}

proc get_bd_pins {args} {
    return [stub::get_pins_of get_bd_pins pin "BD 5-235" pins $args]
}

proc get_bd_intf_pins {args} {
    return [stub::get_pins_of get_bd_intf_pins intf "BD 5-232" "interface pins" $args]
}

proc connect_bd_net {args} {
    stub::record connect_bd_net $args
    set objs [stub::positional $args {-net}]
    set flat {}
    foreach o $objs {
        foreach x $o {
            lappend flat $x
        }
    }
    if {[llength $flat] < 2} {
        stub::raise ERROR "BD 41-701" "connect_bd_net requires at least two pins/ports, or one\
            pin/port and a net"
        stub::raise ERROR "Common 17-39" "'connect_bd_net' failed due to earlier errors."
        error "connect_bd_net failed"
    }
    set id ""
    foreach o $flat {
        if {[info exists stub::pin_net($o)]} {
            set id $stub::pin_net($o)
            break
        }
    }
    if {$id eq ""} {
        set id [incr stub::net_count]
        set stub::net_pins($id) {}
    }
    foreach o $flat {
        if {[info exists stub::pin_net($o)] && $stub::pin_net($o) ne $id} {
            # two nets joined: the pins of the other net move to this one
            set old $stub::pin_net($o)
            foreach p $stub::net_pins($old) {
                set stub::pin_net($p) $id
                lappend stub::net_pins($id) $p
            }
            unset stub::net_pins($old)
        }
        if {$o ni $stub::net_pins($id)} {
            lappend stub::net_pins($id) $o
        }
        set stub::pin_net($o) $id
    }
    return ""
}

proc connect_bd_intf_net {args} {
    stub::record connect_bd_intf_net $args
    set pins [stub::positional $args {-intf_net -boundary_type}]
    if {[llength $pins] < 2 || [lindex $pins 0] eq "" || [lindex $pins 1] eq ""} {
        stub::raise ERROR "BD 5-106" "Arguments to the connect_bd_intf_net command cannot be\
            empty."
        stub::raise ERROR "Common 17-39" "'connect_bd_intf_net' failed due to earlier errors."
        error "connect_bd_intf_net failed"
    }
    lassign $pins a b
    set stub::intf_peer($a) $b
    set stub::intf_peer($b) $a
    return ""
}

proc create_bd_port {args} {
    stub::record create_bd_port $args
    set name "/[lindex [stub::positional $args {-dir -type -freq_hz -from -to}] 0]"
    lappend stub::bd_ports [string range $name 1 end]
    if {[stub::opt $args -type] eq "clk"} {
        set stub::clk_port($name) [stub::opt $args -freq_hz $stub::default_freq_hz]
    }
    return $name
}

# ------------------------------------------------------------------------------------------
# Clock properties
# ------------------------------------------------------------------------------------------
# The clock source driving PIN's net: {source_pin FREQ_HZ CLK_DOMAIN}, or "".
proc stub::clock_source {pin} {
    if {![info exists stub::pin_net($pin)]} {
        return ""
    }
    foreach p $stub::net_pins($stub::pin_net($pin)) {
        if {[info exists stub::clk_port($p)]} {
            return [list $p $stub::clk_port($p) ${stub::bd_name}_[string range $p 1 end]]
        }
        set m [stub::cell_model [file dirname $p]]
        if {$m ne "" && [dict exists $m sources [file tail $p]]} {
            set s [dict get $m sources [file tail $p]]
            return [list $p [dict get $s FREQ_HZ] [dict get $s CLK_DOMAIN]]
        }
    }
    return ""
}

# The value PIN declares itself for PROP (FREQ_HZ, CLK_DOMAIN), or "".
proc stub::pin_user {pin prop} {
    if {[info exists stub::props(CONFIG.$prop,$pin)]} {
        return $stub::props(CONFIG.$prop,$pin)
    }
    set m [stub::cell_model [file dirname $pin]]
    set name [file tail $pin]
    if {$m ne "" && [dict exists $m user $name $prop]} {
        return [dict get $m user $name $prop]
    }
    return ""
}

# The value of PROP on a clock pin after propagation.
proc stub::pin_value {pin prop} {
    set user [stub::pin_user $pin $prop]
    if {$user ne ""} {
        return $user
    }
    set src [stub::clock_source $pin]
    if {$src ne ""} {
        return [lindex $src [expr {$prop eq "FREQ_HZ" ? 1 : 2}]]
    }
    return [expr {$prop eq "FREQ_HZ" ? $stub::default_freq_hz : ""}]
}

# The value of PROP on an interface pin: its own, else its clock's; "" for no clock.
proc stub::intf_value {pin prop} {
    if {[info exists stub::props(CONFIG.$prop,$pin)]} {
        return $stub::props(CONFIG.$prop,$pin)
    }
    set m [stub::cell_model [file dirname $pin]]
    set name [file tail $pin]
    if {$m eq "" || ![dict exists $m intfs $name]} {
        return ""
    }
    set intf [dict get $m intfs $name]
    if {[dict exists $intf user $prop]} {
        return [dict get $intf user $prop]
    }
    set clock [dict get $intf clock]
    if {$clock eq ""} {
        if {[info exists stub::cell_ref([file dirname $pin])] && $prop eq "FREQ_HZ"} {
            return $stub::default_freq_hz
        }
        return ""
    }
    return [stub::pin_value [file dirname $pin]/$clock $prop]
}

# TDATA_NUM_BYTES of a stream interface pin, or "".
proc stub::tdata_bytes {pin} {
    set cell [file dirname $pin]
    set name [file tail $pin]
    if {[info exists stub::cell_ref($cell)]} {
        set key $stub::cell_ref($cell),${name}_tdata
        if {[info exists stub::module_ports($key)]} {
            return [expr {$stub::module_ports($key) / 8}]
        }
        return ""
    }
    if {[info exists stub::cell_ip($cell)] && $stub::cell_ip($cell) eq "axi_dma"} {
        switch -- $name {
            M_AXIS_MM2S {
                return [expr {[stub::param $cell c_m_axis_mm2s_tdata_width] / 8}]
            }
            S_AXIS_S2MM {
                return [expr {[stub::param $cell c_s_axis_s2mm_tdata_width] / 8}]
            }
        }
    }
    return ""
}

proc stub::intf_mode {pin} {
    set m [stub::cell_model [file dirname $pin]]
    if {$m ne "" && [dict exists $m intfs [file tail $pin] mode]} {
        return [dict get $m intfs [file tail $pin] mode]
    }
    return [expr {[string match S* [file tail $pin]] ? "slave" : "master"}]
}

proc stub::all_cells {} {
    return [lsort [concat [array names stub::cell_ip] [array names stub::cell_ref]]]
}

proc validate_bd_design {args} {
    stub::record validate_bd_design $args
    set errors_before $stub::msg_count(ERROR)
    # clock pins without a clock source
    set lonely {}
    set sinks {}
    foreach cell [stub::all_cells] {
        set m [stub::cell_model $cell]
        if {$m eq ""} {
            continue
        }
        foreach clk [dict get $m clocks] {
            if {[stub::clock_source $cell/$clk] eq ""} {
                lappend lonely $cell/$clk
            } else {
                lappend sinks $cell/$clk
            }
        }
    }
    if {[llength $lonely] > 0} {
        stub::raise ERROR "BD 41-758" "The following clock pins are not connected to a valid\
            clock source: \n[join $lonely \n]"
    }
    # a clock pin's own FREQ_HZ / CLK_DOMAIN against its source's
    foreach pin $sinks {
        lassign [stub::clock_source $pin] src freq domain
        foreach {prop want} [list FREQ_HZ $freq CLK_DOMAIN $domain] {
            set user [stub::pin_user $pin $prop]
            if {$user ne "" && $user ne $want} {
                stub::raise {CRITICAL WARNING} "BD 41-238" "Port/Pin property $prop does not\
                    match between ${pin}($user) and ${src}($want)"
            }
        }
    }
    # interface nets: clock association, then the properties of the two ends
    set done {}
    foreach a [lsort [array names stub::intf_peer]] {
        set b $stub::intf_peer($a)
        if {"$b $a" in $done} {
            continue
        }
        lappend done "$a $b"
        foreach p [list $a $b] {
            set cell [file dirname $p]
            if {[info exists stub::cell_ref($cell)]} {
                set m [stub::cell_model $cell]
                if {
                    [dict exists $m intfs [file tail $p]]
                    && [dict get $m intfs [file tail $p] clock] eq ""
                } {
                    stub::raise {CRITICAL WARNING} "BD 41-967" "AXI interface pin $p is not\
                        associated to any clock pin. It may not work correctly."
                }
            }
        }
        if {[stub::intf_mode $a] eq "master" && [stub::intf_mode $b] eq "slave"} {
            lassign [list $b $a] a b
        }
        foreach prop {FREQ_HZ CLK_DOMAIN TDATA_NUM_BYTES} {
            if {$prop eq "TDATA_NUM_BYTES"} {
                set va [stub::tdata_bytes $a]
                set vb [stub::tdata_bytes $b]
            } else {
                set va [stub::intf_value $a $prop]
                set vb [stub::intf_value $b $prop]
            }
            if {$va ne "" && $vb ne "" && $va ne $vb} {
                stub::raise {CRITICAL WARNING} "BD 41-237" "Bus Interface property $prop does\
                    not match between ${a}($va) and ${b}($vb)"
            }
        }
    }
    for {set i 0} {$i < [stub::env STUB_BD_CRITICAL_WARNINGS 0]} {incr i} {
        stub::raise {CRITICAL WARNING} "BD 41-1356" "stub critical warning [expr {$i + 1}]"
    }
    if {$stub::msg_count(ERROR) > $errors_before} {
        stub::raise ERROR "Common 17-39" "'validate_bd_design' failed due to earlier errors."
        error "validate_bd_design failed"
    }
    return ""
}

# ------------------------------------------------------------------------------------------
# Addresses
# ------------------------------------------------------------------------------------------
# The slave segments reachable from master interface pin PIN: {cell/intf/segment range} ...
# Through an axi_interconnect, a slave port reaches every master port of that interconnect.
proc stub::reachable {pin {depth 0}} {
    if {$depth > 8 || ![info exists stub::intf_peer($pin)]} {
        return {}
    }
    set peer $stub::intf_peer($pin)
    set cell [file dirname $peer]
    set m [stub::cell_model $cell]
    if {$m eq ""} {
        return {}
    }
    set out {}
    if {[dict exists $m segs [file tail $peer]]} {
        lassign [dict get $m segs [file tail $peer]] seg range
        lappend out [list $peer/$seg $range]
    }
    if {
        [info exists stub::cell_ip($cell)] && $stub::cell_ip($cell) eq "axi_interconnect"
        && [string match S*_AXI [file tail $peer]]
    } {
        for {set i 0} {$i < [stub::param $cell NUM_MI]} {incr i} {
            set next $cell/[format M%02d_AXI $i]
            set out [concat $out [stub::reachable $next [expr {$depth + 1}]]]
        }
    }
    return $out
}

proc stub::map_segment {space seg offset range} {
    set parts [split [string trimleft $seg /] /]
    set name SEG_[lindex $parts 0]_[lindex $parts end]
    if {![info exists stub::space_segs($space)]} {
        set stub::space_segs($space) {}
    }
    foreach entry $stub::space_segs($space) {
        if {[lindex $entry 3] eq $seg} {
            return
        }
    }
    lappend stub::space_segs($space) [list $space/$name $offset $range $seg]
}

proc assign_bd_address {args} {
    stub::record assign_bd_address $args
    set targets [stub::positional $args {-offset -range -target_address_space}]
    if {[llength $targets] > 0} {
        set space [stub::opt $args -target_address_space]
        foreach seg $targets {
            stub::map_segment $space $seg [stub::opt $args -offset 0x00000000] \
                [stub::opt $args -range 64K]
        }
        return ""
    }
    # everything not yet assigned: every master address space gets what it reaches
    foreach cell [stub::all_cells] {
        set m [stub::cell_model $cell]
        if {$m eq ""} {
            continue
        }
        dict for {space intf} [dict get $m spaces] {
            foreach hit [stub::reachable $cell/$intf] {
                lassign $hit seg range
                set offset 0x00000000
                if {[string match */Reg $seg]} {
                    set offset 0x40000000
                }
                stub::map_segment $cell/$space $seg $offset $range
            }
        }
    }
    return ""
}

proc get_bd_addr_spaces {args} {
    stub::record get_bd_addr_spaces $args
    set out {}
    foreach obj [stub::bd_objects $args] {
        set m [stub::cell_model [file dirname $obj]]
        if {$m eq "" || [dict exists $m spaces [file tail $obj]]} {
            lappend out $obj
        }
    }
    return $out
}

proc get_bd_addr_segs {args} {
    stub::record get_bd_addr_segs $args
    set of [stub::opt $args -of_objects]
    if {$of ne ""} {
        set out {}
        foreach space $of {
            if {[info exists stub::space_segs($space)]} {
                foreach entry $stub::space_segs($space) {
                    lappend out [lindex $entry 0]
                }
            }
        }
        return $out
    }
    return [stub::bd_objects $args]
}

# OFFSET / RANGE of a mapped segment, or "".
proc stub::segment_property {seg prop} {
    foreach space [array names stub::space_segs] {
        foreach entry $stub::space_segs($space) {
            if {[lindex $entry 0] eq $seg} {
                return [lindex $entry [expr {$prop eq "OFFSET" ? 1 : 2}]]
            }
        }
    }
    return ""
}

# ------------------------------------------------------------------------------------------
# The hardware handoff (.hwh) generate_target writes
# ------------------------------------------------------------------------------------------
# As Vivado writes it: one MODULE per cell with its PARAMETERS (an IP's configuration
# parameters as set, the IP defaults the model knows, and for axi_dma the HDL generics in upper
# case, C_INCLUDE_SG beside c_include_sg, as in Vivado's .hwh files), and the PS7's MEMORYMAP of
# the register windows. STUB_HWH_NO_PARAMS leaves the PARAMETERS out (a handoff from another
# design).
proc stub::hwh_text {} {
    set ip_vlnv [dict create]
    foreach {name version} $stub::ipdef_versions {
        dict set ip_vlnv $name xilinx.com:ip:$name:$version
    }
    set lines [list {<?xml version="1.0" encoding="UTF-8" standalone="no" ?>} \
        "<EDKSYSTEM EDWVERSION=\"1.2\" VIVADOVERSION=\"[stub::env STUB_VERSION 2020.2]\">" \
        "  <SYSTEMINFO ARCH=\"zynq\" DEVICE=\"7z020\" NAME=\"$stub::bd_name\"\
        PACKAGE=\"clg400\" SPEEDGRADE=\"-1\"/>" "  <MODULES>"]
    foreach cell [stub::all_cells] {
        set inst [string range $cell 1 end]
        if {[info exists stub::cell_ref($cell)]} {
            set type $stub::cell_ref($cell)
            set vlnv xilinx.com:module_ref:$type:1.0
        } else {
            set type $stub::cell_ip($cell)
            set vlnv [dict get $ip_vlnv $type]
        }
        lappend lines "    <MODULE FULLNAME=\"$cell\" INSTANCE=\"$inst\" MODTYPE=\"$type\"\
            VLNV=\"$vlnv\">"
        if {[stub::env STUB_HWH_NO_PARAMS ""] eq ""} {
            lappend lines "      <PARAMETERS>"
            set params [dict create]
            if {[info exists stub::cell_ip($cell)] && [dict exists $stub::ip_defaults $type]} {
                foreach {n v} [dict get $stub::ip_defaults $type] {
                    dict set params $n [stub::param $cell $n]
                }
            }
            foreach key [lsort [array names stub::props CONFIG.*,$cell]] {
                set n [string range [lindex [split $key ,] 0] 7 end]
                if {$type eq "axi_dma"} {
                    set n [string tolower $n]
                }
                dict set params $n $stub::props($key)
            }
            dict for {n v} $params {
                if {$type eq "axi_dma"} {
                    lappend lines "        <PARAMETER NAME=\"[string toupper $n]\" VALUE=\"$v\"/>"
                }
                lappend lines "        <PARAMETER NAME=\"$n\" VALUE=\"$v\"/>"
            }
            lappend lines "      </PARAMETERS>"
        }
        if {[info exists stub::cell_ip($cell)] && $type eq "processing_system7"} {
            lappend lines "      <MEMORYMAP>"
            foreach space [lsort [array names stub::space_segs $cell/*]] {
                foreach entry $stub::space_segs($space) {
                    lassign $entry name offset range seg
                    if {![string match */Reg $seg]} {
                        continue
                    }
                    set parts [split [string trimleft $seg /] /]
                    set base [expr {$offset}]
                    set high [expr {$base + [stub::bytes $range] - 1}]
                    lappend lines [format "        <MEMRANGE ADDRESSBLOCK=\"Reg\"\
                        BASENAME=\"C_BASEADDR\" BASEVALUE=\"0x%08X\" HIGHNAME=\"C_HIGHADDR\"\
                        HIGHVALUE=\"0x%08X\" INSTANCE=\"%s\" MASTERBUSINTERFACE=\"M_AXI_GP0\"\
                        MEMTYPE=\"REGISTER\" SLAVEBUSINTERFACE=\"%s\"/>" $base $high \
                        [lindex $parts 0] [lindex $parts 1]]
                }
            }
            lappend lines "      </MEMORYMAP>"
        }
        lappend lines "    </MODULE>"
    }
    lappend lines "  </MODULES>" "</EDKSYSTEM>"
    return [join $lines \n]
}

# "64K" / "512M" / a number -> bytes
proc stub::bytes {range} {
    if {[regexp {^(\d+)([KMG])$} $range -> n unit]} {
        return [expr {$n * [dict get {K 1024 M 1048576 G 1073741824} $unit]}]
    }
    return [expr {$range}]
}
