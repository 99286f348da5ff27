"""Development tools that read ../shared; not part of the installed package."""
