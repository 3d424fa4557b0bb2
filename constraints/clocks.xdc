# Clock constraints of the overlay.
#
# clk_fpga_0 (FCLK_CLK0, 7.000 ns = IO PLL 1000 MHz / 7) is created by the processing_system7
# IP from its PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ; vivado/build.tcl refuses a PS7 whose actual
# FCLK0 differs from 142.857 MHz, and the timing gate refuses a routed design whose clk_fpga_0
# period is not 7.000 ns. Nothing crosses between the board oscillator and the fabric clock.
set_clock_groups -asynchronous \
    -group [get_clocks -include_generated_clocks sys_clk_pin] \
    -group [get_clocks -include_generated_clocks clk_fpga_0]
