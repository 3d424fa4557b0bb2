# The real CONFIG parameter names of the Xilinx IPs that vivado/build.tcl configures. The stubs
# refuse, as Vivado does, a set_property or get_property of a CONFIG.* name that is not listed
# for the IP of the cell (names compare case-insensitively, as in Vivado), so that a misspelt
# key fails `make bitstream-dryrun` and tests/vivado/test_vivado_tcl.py.
#
# Every name below was copied from one of these public sources (repository, path, commit):
#
# [base]     Xilinx/PYNQ, boards/Pynq-Z1/base/base.tcl, 19a33c76c661274bae441281456dc111cdf67a91:
#            the PYNQ-Z1 base overlay's processing_system7_0 (a full write_bd_tcl dump of the
#            PS7 parameters), its axi_interconnect cells (NUM_MI) and proc_sys_reset cells
#            (created without properties).
# [resizer]  Xilinx/PYNQ-HelloWorld, boards/Pynq-Z1/resizer/resizer.tcl,
#            7d30bb7df66a5f1b8c9f6b81a99574e963139c24 (Vivado 2020.2, PYNQ-Z1): PS7
#            PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ, PCW_FPGA_FCLK0..3_ENABLE, PCW_USE_S_AXI_HP0;
#            axi_dma c_include_sg, c_mm2s_burst_size, c_s2mm_burst_size,
#            c_sg_include_stscntrl_strm, c_sg_length_width; axi_interconnect NUM_SI, NUM_MI;
#            proc_sys_reset without properties.
# [axidma]   Xilinx/embeddedsw, XilinxProcessorIPLib/drivers/axidma/data/axidma.tcl,
#            056ac087e6ed7780b63639e7871f7cbdc0beff4c: the AXI DMA hardware parameters the
#            driver reads (C_INCLUDE_MM2S, C_INCLUDE_S2MM, C_INCLUDE_MM2S_DRE,
#            C_INCLUDE_S2MM_DRE, C_M_AXI_MM2S_DATA_WIDTH, C_M_AXI_S2MM_DATA_WIDTH, C_INCLUDE_SG,
#            C_MICRO_DMA, c_addr_width, c_sg_length_width, ...).
# [pg022]    AMD PG022 (AXI DataMover, the core inside AXI DMA), "User Parameters" table,
#            https://docs.amd.com/r/en-US/pg022_axi_datamover/User-Parameters:
#            c_m_axis_mm2s_tdata_width and c_s_axis_s2mm_tdata_width ("Stream data Width"),
#            the names AXI DMA uses for its stream widths; set on axi_dma 7.1 cells in public
#            Tcl, e.g. MEEPproject/aurora-dma, ip/axi_dma.tcl.
#
# Not every name of an IP is here: the PS7 list holds the names this flow sets or reads (each
# checked against [base] or [resizer]), the DMA list the names of [axidma], [resizer] and
# [pg022]. Add a name only with its source. tests/vivado/test_vivado_tcl.py repeats the citations.

namespace eval stub {
    variable ip_params
    array set ip_params {}

    # [base] unless marked; [resizer]: PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ.
    set ip_params(processing_system7) {
        PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ
        PCW_APU_CLK_RATIO_ENABLE PCW_APU_PERIPHERAL_FREQMHZ
        PCW_CPU_PERIPHERAL_CLKSRC PCW_CRYSTAL_PERIPHERAL_FREQMHZ PCW_DDR_PERIPHERAL_CLKSRC
        PCW_ENET0_ENET0_IO PCW_ENET0_GRP_MDIO_ENABLE PCW_ENET0_GRP_MDIO_IO
        PCW_ENET0_PERIPHERAL_ENABLE PCW_ENET0_PERIPHERAL_FREQMHZ PCW_ENET0_RESET_ENABLE
        PCW_ENET0_RESET_IO PCW_ENET_RESET_ENABLE PCW_ENET_RESET_SELECT
        PCW_EN_CLK0_PORT PCW_EN_RST0_PORT
        PCW_FCLK0_PERIPHERAL_CLKSRC PCW_FPGA0_PERIPHERAL_FREQMHZ
        PCW_FPGA_FCLK0_ENABLE PCW_FPGA_FCLK1_ENABLE PCW_FPGA_FCLK2_ENABLE PCW_FPGA_FCLK3_ENABLE
        PCW_GPIO_MIO_GPIO_ENABLE PCW_GPIO_MIO_GPIO_IO
        PCW_MIO_1_PULLUP PCW_MIO_2_PULLUP PCW_MIO_3_PULLUP PCW_MIO_4_PULLUP
        PCW_MIO_5_PULLUP PCW_MIO_6_PULLUP PCW_MIO_7_PULLUP PCW_MIO_8_PULLUP
        PCW_PACKAGE_NAME PCW_PRESET_BANK0_VOLTAGE PCW_PRESET_BANK1_VOLTAGE
        PCW_QSPI_GRP_FBCLK_ENABLE PCW_QSPI_GRP_FBCLK_IO PCW_QSPI_GRP_SINGLE_SS_ENABLE
        PCW_QSPI_GRP_SINGLE_SS_IO PCW_QSPI_PERIPHERAL_ENABLE PCW_QSPI_PERIPHERAL_FREQMHZ
        PCW_QSPI_QSPI_IO
        PCW_SD0_GRP_CD_ENABLE PCW_SD0_GRP_CD_IO PCW_SD0_GRP_POW_ENABLE PCW_SD0_GRP_WP_ENABLE
        PCW_SD0_PERIPHERAL_ENABLE PCW_SD0_SD0_IO PCW_SDIO_PERIPHERAL_FREQMHZ
        PCW_S_AXI_HP0_DATA_WIDTH PCW_S_AXI_HP1_DATA_WIDTH
        PCW_UART0_BAUD_RATE PCW_UART0_PERIPHERAL_ENABLE PCW_UART0_UART0_IO
        PCW_UART1_PERIPHERAL_ENABLE PCW_UART_PERIPHERAL_FREQMHZ
        PCW_UIPARAM_DDR_ADV_ENABLE PCW_UIPARAM_DDR_CLOCK_STOP_EN
        PCW_UIPARAM_DDR_CLOCK_0_PROPOGATION_DELAY PCW_UIPARAM_DDR_CLOCK_1_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_CLOCK_2_PROPOGATION_DELAY PCW_UIPARAM_DDR_CLOCK_3_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_DQS_0_PROPOGATION_DELAY PCW_UIPARAM_DDR_DQS_1_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_DQS_2_PROPOGATION_DELAY PCW_UIPARAM_DDR_DQS_3_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_DQ_0_PROPOGATION_DELAY PCW_UIPARAM_DDR_DQ_1_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_DQ_2_PROPOGATION_DELAY PCW_UIPARAM_DDR_DQ_3_PROPOGATION_DELAY
        PCW_UIPARAM_DDR_AL PCW_UIPARAM_DDR_BANK_ADDR_COUNT PCW_UIPARAM_DDR_BL
        PCW_UIPARAM_DDR_BOARD_DELAY0 PCW_UIPARAM_DDR_BOARD_DELAY1 PCW_UIPARAM_DDR_BOARD_DELAY2
        PCW_UIPARAM_DDR_BOARD_DELAY3 PCW_UIPARAM_DDR_BUS_WIDTH PCW_UIPARAM_DDR_CL
        PCW_UIPARAM_DDR_CLOCK_0_LENGTH_MM PCW_UIPARAM_DDR_CLOCK_0_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_CLOCK_1_LENGTH_MM PCW_UIPARAM_DDR_CLOCK_1_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_CLOCK_2_LENGTH_MM PCW_UIPARAM_DDR_CLOCK_2_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_CLOCK_3_LENGTH_MM PCW_UIPARAM_DDR_CLOCK_3_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_COL_ADDR_COUNT PCW_UIPARAM_DDR_CWL PCW_UIPARAM_DDR_DEVICE_CAPACITY
        PCW_UIPARAM_DDR_DQS_0_LENGTH_MM PCW_UIPARAM_DDR_DQS_0_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQS_1_LENGTH_MM PCW_UIPARAM_DDR_DQS_1_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQS_2_LENGTH_MM PCW_UIPARAM_DDR_DQS_2_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQS_3_LENGTH_MM PCW_UIPARAM_DDR_DQS_3_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_0 PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_1
        PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_2 PCW_UIPARAM_DDR_DQS_TO_CLK_DELAY_3
        PCW_UIPARAM_DDR_DQ_0_LENGTH_MM PCW_UIPARAM_DDR_DQ_0_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQ_1_LENGTH_MM PCW_UIPARAM_DDR_DQ_1_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQ_2_LENGTH_MM PCW_UIPARAM_DDR_DQ_2_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DQ_3_LENGTH_MM PCW_UIPARAM_DDR_DQ_3_PACKAGE_LENGTH
        PCW_UIPARAM_DDR_DRAM_WIDTH PCW_UIPARAM_DDR_ECC PCW_UIPARAM_DDR_ENABLE
        PCW_UIPARAM_DDR_FREQ_MHZ PCW_UIPARAM_DDR_HIGH_TEMP PCW_UIPARAM_DDR_MEMORY_TYPE
        PCW_UIPARAM_DDR_PARTNO PCW_UIPARAM_DDR_ROW_ADDR_COUNT PCW_UIPARAM_DDR_SPEED_BIN
        PCW_UIPARAM_DDR_TRAIN_DATA_EYE PCW_UIPARAM_DDR_TRAIN_READ_GATE
        PCW_UIPARAM_DDR_TRAIN_WRITE_LEVEL PCW_UIPARAM_DDR_T_FAW PCW_UIPARAM_DDR_T_RAS_MIN
        PCW_UIPARAM_DDR_T_RC PCW_UIPARAM_DDR_T_RCD PCW_UIPARAM_DDR_T_RP
        PCW_UIPARAM_DDR_USE_INTERNAL_VREF
        PCW_USB0_PERIPHERAL_ENABLE PCW_USB0_PERIPHERAL_FREQMHZ PCW_USB0_RESET_ENABLE
        PCW_USB0_RESET_IO PCW_USB0_USB0_IO PCW_USB_RESET_ENABLE PCW_USB_RESET_SELECT
        PCW_USE_FABRIC_INTERRUPT PCW_USE_M_AXI_GP0 PCW_USE_S_AXI_HP0 PCW_USE_S_AXI_HP1
    }

    # [axidma], [resizer], [pg022] (the two stream widths).
    set ip_params(axi_dma) {
        c_include_sg c_sg_length_width c_sg_include_stscntrl_strm c_addr_width c_micro_dma
        c_enable_multi_channel c_num_mm2s_channels c_num_s2mm_channels
        c_include_mm2s c_include_mm2s_dre c_m_axi_mm2s_data_width c_mm2s_burst_size
        c_include_s2mm c_include_s2mm_dre c_m_axi_s2mm_data_width c_s2mm_burst_size
        c_m_axis_mm2s_tdata_width c_s_axis_s2mm_tdata_width
    }

    # [base], [resizer].
    set ip_params(axi_interconnect) {NUM_SI NUM_MI}

    # [base], [resizer]: created without properties; the flow sets none.
    set ip_params(proc_sys_reset) {}
}
