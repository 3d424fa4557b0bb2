# PYNQ-Z1 settings of the Zynq-7020 processing system (processing_system7), written out so that
# the build needs no board files. Values are those of the public PYNQ-Z1 board preset: 50 MHz
# PS crystal, 650 MHz APU, 16-bit DDR3 (one 4 Gb x16 part, 512 MB) at 525 MHz with the board's
# trace delays, QSPI, ENET0 (RGMII + MDIO), USB0, SD0 and UART0 on MIO; the DDR settings are
# those of PYNQ's own base overlay for the PYNQ-Z1 (base.tcl at v2.7 and v3.0, cited below).
#
# Only board facts live here. What the overlay needs (FCLK0, HP0/HP1, GP0) is set by build.tcl.
# Vivado 2020.2 syntax; runs unchanged under the recording stubs of tests/tcl_stubs.

namespace eval ps7_pynq_z1 {
    # Clocks and PLLs: 50 MHz crystal; ARM PLL 1300 MHz, DDR PLL 1050 MHz, IO PLL 1000 MHz.
    # FCLK0 at 142.857 MHz is IO PLL 1000 MHz / 7 (set by build.tcl).
    variable clocks {
        CONFIG.PCW_CRYSTAL_PERIPHERAL_FREQMHZ {50}
        CONFIG.PCW_APU_PERIPHERAL_FREQMHZ {650}
        CONFIG.PCW_APU_CLK_RATIO_ENABLE {6:2:1}
        CONFIG.PCW_CPU_PERIPHERAL_CLKSRC {ARM PLL}
        CONFIG.PCW_DDR_PERIPHERAL_CLKSRC {DDR PLL}
        CONFIG.PCW_FCLK0_PERIPHERAL_CLKSRC {IO PLL}
        CONFIG.PCW_PRESET_BANK0_VOLTAGE {LVCMOS 3.3V}
        CONFIG.PCW_PRESET_BANK1_VOLTAGE {LVCMOS 1.8V}
        CONFIG.PCW_PACKAGE_NAME {clg400}
    }

    # DDR3: 16-bit bus (one 4 Gb x16 part, 512 MB) at 525 MHz. Every PCW_UIPARAM_DDR_* value
    # below is PYNQ's own PYNQ-Z1 base overlay's, the same in both board images this flow is
    # for (Xilinx/PYNQ, boards/Pynq-Z1/base/base.tcl):
    #   v2.7.0 (59515a9b5de6fad0ff0538bfc50010b16f53c9a8, Vivado 2020.2), lines 3455-3526;
    #   v3.0.1 (93ddd21ab623883590a8c8b07f0b157b2855da4b, Vivado 2022.1), lines 3430-3501
    #   (v2.6.0, Vivado 2020.1, has the same values).
    # The part is "Custom": base.tcl writes the timing out (tRCD, tRP 13.125 ns, tRC 50.625 ns)
    # rather than take it from a part number.
    #
    # DQS_TO_CLK_DELAY_2/3 are 0.000, as base.tcl has them. The 2016 preset this file used to
    # follow gives them -0.009 / -0.033 (base.tcl keeps those numbers only as the read-only
    # PCW_PACKAGE_DDR_DQS_TO_CLK_DELAY_2/3, which this flow does not set), and processing_system7
    # answers each negative one with a CRITICAL WARNING numbered by occurrence, [PSU-1] for
    # DELAY_2 and [PSU-2] for DELAY_3, again after every later set_property on the cell (public
    # logs: fpgasystems/spooNN issue 14, open-sdr/openwifi-hw issue 102; docs/vivado.md).
    # Lanes 2 and 3 are unused on the 16-bit bus: their lengths are 0.
    variable ddr_part {
        CONFIG.PCW_UIPARAM_DDR_ENABLE {1}
        CONFIG.PCW_UIPARAM_DDR_MEMORY_TYPE {DDR 3}
        CONFIG.PCW_UIPARAM_DDR_PARTNO {Custom}
        CONFIG.PCW_UIPARAM_DDR_BUS_WIDTH {16 Bit}
        CONFIG.PCW_UIPARAM_DDR_ECC {Disabled}
        CONFIG.PCW_UIPARAM_DDR_FREQ_MHZ {525}
    }

    variable ddr_timing {
        CONFIG.PCW_UIPARAM_DDR_ADV_ENABLE {0}
        CONFIG.PCW_UIPARAM_DDR_AL {0}
        CONFIG.PCW_UIPARAM_DDR_BANK_ADDR_COUNT {3}
        CONFIG.PCW_UIPARAM_DDR_BL {8}
        CONFIG.PCW_UIPARAM_DDR_CL {7}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_STOP_EN {0}
        CONFIG.PCW_UIPARAM_DDR_COL_ADDR_COUNT {10}
        CONFIG.PCW_UIPARAM_DDR_CWL {6}
        CONFIG.PCW_UIPARAM_DDR_DEVICE_CAPACITY {4096 MBits}
        CONFIG.PCW_UIPARAM_DDR_DRAM_WIDTH {16 Bits}
        CONFIG.PCW_UIPARAM_DDR_HIGH_TEMP {Normal (0-85)}
        CONFIG.PCW_UIPARAM_DDR_ROW_ADDR_COUNT {15}
        CONFIG.PCW_UIPARAM_DDR_SPEED_BIN {DDR3_1066F}
        CONFIG.PCW_UIPARAM_DDR_TRAIN_DATA_EYE {1}
        CONFIG.PCW_UIPARAM_DDR_TRAIN_READ_GATE {1}
        CONFIG.PCW_UIPARAM_DDR_TRAIN_WRITE_LEVEL {1}
        CONFIG.PCW_UIPARAM_DDR_T_FAW {40.0}
        CONFIG.PCW_UIPARAM_DDR_T_RAS_MIN {35.0}
        CONFIG.PCW_UIPARAM_DDR_T_RC {50.625}
        CONFIG.PCW_UIPARAM_DDR_T_RCD {13.125}
        CONFIG.PCW_UIPARAM_DDR_T_RP {13.125}
        CONFIG.PCW_UIPARAM_DDR_USE_INTERNAL_VREF {0}
    }

    variable ddr_board {
        CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY0 {0.223}
        CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY1 {0.212}
        CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY2 {0.085}
        CONFIG.PCW_UIPARAM_DDR_BOARD_DELAY3 {0.092}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_0_LENGTH_MM {25.8}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_0_PACKAGE_LENGTH {80.4535}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_0_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_1_LENGTH_MM {25.8}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_1_PACKAGE_LENGTH {80.4535}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_1_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_2_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_2_PACKAGE_LENGTH {80.4535}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_2_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_3_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_3_PACKAGE_LENGTH {80.4535}
        CONFIG.PCW_UIPARAM_DDR_CLOCK_3_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQS_0_LENGTH_MM {15.6}
        CONFIG.PCW_UIPARAM_DDR_DQS_0_PACKAGE_LENGTH {105.056}
        CONFIG.PCW_UIPARAM_DDR_DQS_0_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQS_1_LENGTH_MM {18.8}
        CONFIG.PCW_UIPARAM_DDR_DQS_1_PACKAGE_LENGTH {66.904}
        CONFIG.PCW_UIPARAM_DDR_DQS_1_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQS_2_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_DQS_2_PACKAGE_LENGTH {89.1715}
        CONFIG.PCW_UIPARAM_DDR_DQS_2_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQS_3_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_DQS_3_PACKAGE_LENGTH {113.63}
        CONFIG.PCW_UIPARAM_DDR_DQS_3_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_0 {0.040}
        CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_1 {0.058}
        CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_2 {0.000}
        CONFIG.PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_3 {0.000}
        CONFIG.PCW_UIPARAM_DDR_DQ_0_LENGTH_MM {16.5}
        CONFIG.PCW_UIPARAM_DDR_DQ_0_PACKAGE_LENGTH {98.503}
        CONFIG.PCW_UIPARAM_DDR_DQ_0_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQ_1_LENGTH_MM {18}
        CONFIG.PCW_UIPARAM_DDR_DQ_1_PACKAGE_LENGTH {68.5855}
        CONFIG.PCW_UIPARAM_DDR_DQ_1_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQ_2_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_DQ_2_PACKAGE_LENGTH {90.295}
        CONFIG.PCW_UIPARAM_DDR_DQ_2_PROPOGATION_DELAY {160}
        CONFIG.PCW_UIPARAM_DDR_DQ_3_LENGTH_MM {0}
        CONFIG.PCW_UIPARAM_DDR_DQ_3_PACKAGE_LENGTH {103.977}
        CONFIG.PCW_UIPARAM_DDR_DQ_3_PROPOGATION_DELAY {160}
    }

    # MIO: bank 0 (MIO 0..15) at 3.3 V, bank 1 (MIO 16..53) at 1.8 V.
    #   QSPI flash MIO 1..6 (feedback clock MIO 8), ENET0 reset MIO 9,
    #   UART0 MIO 14..15 (the USB-UART, 115200 baud), ENET0 RGMII MIO 16..27, MDIO MIO 52..53,
    #   USB0 ULPI MIO 28..39 (reset MIO 46), SD0 MIO 40..45 (card detect MIO 47),
    #   the remaining pins are GPIO.
    # The QSPI data mode is left at the IP's default: no public PYNQ-Z1 source this flow's
    # tests cite (tests/tcl_stubs/ip_param_names.tcl) sets it, and the PS boot files of the
    # PYNQ image, not the overlay, configure the flash.
    variable mio {
        CONFIG.PCW_QSPI_PERIPHERAL_ENABLE {1}
        CONFIG.PCW_QSPI_QSPI_IO {MIO 1 .. 6}
        CONFIG.PCW_QSPI_GRP_SINGLE_SS_ENABLE {1}
        CONFIG.PCW_QSPI_GRP_SINGLE_SS_IO {MIO 1 .. 6}
        CONFIG.PCW_QSPI_GRP_FBCLK_ENABLE {1}
        CONFIG.PCW_QSPI_GRP_FBCLK_IO {MIO 8}
        CONFIG.PCW_QSPI_PERIPHERAL_FREQMHZ {200}
        CONFIG.PCW_UART0_PERIPHERAL_ENABLE {1}
        CONFIG.PCW_UART0_UART0_IO {MIO 14 .. 15}
        CONFIG.PCW_UART0_BAUD_RATE {115200}
        CONFIG.PCW_UART_PERIPHERAL_FREQMHZ {100}
        CONFIG.PCW_UART1_PERIPHERAL_ENABLE {0}
        CONFIG.PCW_ENET0_PERIPHERAL_ENABLE {1}
        CONFIG.PCW_ENET0_ENET0_IO {MIO 16 .. 27}
        CONFIG.PCW_ENET0_GRP_MDIO_ENABLE {1}
        CONFIG.PCW_ENET0_GRP_MDIO_IO {MIO 52 .. 53}
        CONFIG.PCW_ENET0_PERIPHERAL_FREQMHZ {1000 Mbps}
        CONFIG.PCW_ENET_RESET_ENABLE {1}
        CONFIG.PCW_ENET_RESET_SELECT {Share reset pin}
        CONFIG.PCW_ENET0_RESET_ENABLE {1}
        CONFIG.PCW_ENET0_RESET_IO {MIO 9}
        CONFIG.PCW_USB0_PERIPHERAL_ENABLE {1}
        CONFIG.PCW_USB0_USB0_IO {MIO 28 .. 39}
        CONFIG.PCW_USB0_PERIPHERAL_FREQMHZ {60}
        CONFIG.PCW_USB_RESET_ENABLE {1}
        CONFIG.PCW_USB_RESET_SELECT {Share reset pin}
        CONFIG.PCW_USB0_RESET_ENABLE {1}
        CONFIG.PCW_USB0_RESET_IO {MIO 46}
        CONFIG.PCW_SD0_PERIPHERAL_ENABLE {1}
        CONFIG.PCW_SD0_SD0_IO {MIO 40 .. 45}
        CONFIG.PCW_SD0_GRP_CD_ENABLE {1}
        CONFIG.PCW_SD0_GRP_CD_IO {MIO 47}
        CONFIG.PCW_SD0_GRP_WP_ENABLE {0}
        CONFIG.PCW_SD0_GRP_POW_ENABLE {0}
        CONFIG.PCW_SDIO_PERIPHERAL_FREQMHZ {50}
        CONFIG.PCW_GPIO_MIO_GPIO_ENABLE {1}
        CONFIG.PCW_GPIO_MIO_GPIO_IO {MIO}
        CONFIG.PCW_MIO_1_PULLUP {enabled}
        CONFIG.PCW_MIO_2_PULLUP {disabled}
        CONFIG.PCW_MIO_3_PULLUP {disabled}
        CONFIG.PCW_MIO_4_PULLUP {disabled}
        CONFIG.PCW_MIO_5_PULLUP {disabled}
        CONFIG.PCW_MIO_6_PULLUP {disabled}
        CONFIG.PCW_MIO_7_PULLUP {disabled}
        CONFIG.PCW_MIO_8_PULLUP {disabled}
    }

    # The groups in the order they are applied: the DDR part first, so that the explicit
    # timing and board delays that follow override whatever the part number implies.
    variable groups {clocks ddr_part ddr_timing ddr_board mio}
}

# All settings as one flat CONFIG.NAME value list (for checks and for the tests).
proc ps7_pynq_z1::settings {} {
    variable groups
    set out {}
    foreach group $groups {
        variable $group
        foreach {name value} [set $group] {
            lappend out $name $value
        }
    }
    return $out
}

# Apply the PYNQ-Z1 settings to a processing_system7 cell, one set_property per group.
proc ps7_pynq_z1::apply {cell} {
    variable groups
    foreach group $groups {
        variable $group
        set_property -dict [set $group] $cell
    }
}
