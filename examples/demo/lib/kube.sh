# Shared helpers, sourced by migration scripts from the tree root:
#   . ./lib/kube.sh
# Every helper fails closed: a failing kubectl call returns non-zero, and the
# runner executes scripts with errexit, so the script stops there.

kube() {
    "${KUBECTL:-kubectl}" "$@"
}

# Prints tenant namespaces, one per line. Never use it directly as a `for`
# word list (`for ns in $(tenant_namespaces)`): a failure there would run the
# loop zero times and still succeed. Assign first, then loop:
#   namespaces=$(tenant_namespaces)
#   for ns in $namespaces; do ...; done
# The listing is captured before it is filtered: in a pipeline the exit
# status is the last command's, so `kube get ... | sed` would hide a failure.
tenant_namespaces() {
    _listing=$(kube get namespaces -l tenant=true -o name) || return 1
    printf '%s\n' "$_listing" | sed 's|^namespace/||'
}
