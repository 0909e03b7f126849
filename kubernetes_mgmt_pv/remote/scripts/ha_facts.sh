# The facts of one Master (after facts_prologue.sh and running.sh).
# Arguments: the two configuration files, the number of packages and the
# packages, then (name, pid file, pending marker) of each daemon.
fact addresses ip -o -4 addr show
for file in "$1" "$2"; do
    if [ -e "$file" ]; then fact "file $file" cat -- "$file"; fi
done
count=$3
shift 3
while [ "$count" -gt 0 ]; do
    fact "package $1" dpkg-query -W -f="\${Status}" "$1"
    shift
    count=$((count - 1))
done
while [ "$#" -gt 0 ]; do
    fact "running $1" running "$1" "$2"
    if [ -e "$3" ]; then fact "pending $1" true; fi
    shift 3
done
if [ -d /run/systemd/system ]; then fact systemd true; fi
