# PYNQ-Z1 (xc7z020clg400-1) pin constraints for the ternary-engine overlay.
#
# The engines run on the PS fabric clock FCLK_CLK0 (142.857 MHz, 7.000 ns); its clock,
# clk_fpga_0, is created by the processing_system7 IP's own constraints. The only PL pin of the
# block design is the board's 125 MHz oscillator, kept for a clock monitor. Other board pins
# (LEDs, buttons, switches, Arduino/RPi headers) are not used: add them here, with the block
# design port of the same name, when a design needs them.

# 125 MHz system clock from the Ethernet PHY oscillator (bank 35, 3.3 V).
set_property -dict {PACKAGE_PIN H16 IOSTANDARD LVCMOS33} [get_ports sysclk]
create_clock -period 8.000 -name sys_clk_pin -waveform {0.000 4.000} [get_ports sysclk]
