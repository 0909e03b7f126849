# The start of every gathering script (see facts.py): its first argument
# is the boundary, the rest are the script's own. `fact NAME COMMAND...`
# prints one section: NAME, the command's stdout, its status and stderr.
boundary=$1
shift
fact() {
    printf '\n%s %s\n' "$boundary" "$1"
    shift
    { err=$("$@" 2>&1 >&3 3>&-); status=$?; } 3>&1
    printf '\n%s status %d\n%s' "$boundary" "$status" "$err"
}
