# Run a Vivado Tcl script under a plain tclsh with the recording stubs loaded:
#
#   STUB_LOG=/tmp/calls.jsonl tclsh tests/tcl_stubs/run_stubbed.tcl vivado/build.tcl \
#       --out build --engines-tcl build/vivado/engines.tcl
#
# The script sees the remaining words in $argv, as it would after `vivado -tclargs`.

set stubs_dir [file dirname [file normalize [info script]]]
source [file join $stubs_dir vivado_stubs.tcl]

if {[llength $argv] < 1} {
    puts stderr "usage: tclsh run_stubbed.tcl SCRIPT.tcl ?ARGS...?"
    exit 2
}
set script [file normalize [lindex $argv 0]]
set argv [lrange $argv 1 end]
set argc [llength $argv]
set argv0 $script
source $script
