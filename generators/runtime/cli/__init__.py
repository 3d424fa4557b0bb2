"""The command line's runtime commands: convert, info, decode, chat, selftest."""
