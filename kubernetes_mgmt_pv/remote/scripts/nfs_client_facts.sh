# A node's facts: its OS, its NFS client packages, and the route (source
# address) towards each NFS server address. Arguments: number of
# packages, the packages, the server addresses.
count=$1
shift
fact os-release cat -- /etc/os-release
while [ "$count" -gt 0 ]; do
    fact "package $1" dpkg-query -W -f="\${Status}" "$1"
    shift
    count=$((count - 1))
done
for server in "$@"; do fact "route $server" ip -o route get "$server"; done
