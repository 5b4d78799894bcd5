#!/bin/sh
echo "coverage tools are not available in dreplay's offline build" >&2
exit 1
