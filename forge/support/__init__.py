"""Forge's floor: leaves that import nothing of Forge (diagnostics, atomic files,
xDSL fixes, host facts), which every other level may use."""
