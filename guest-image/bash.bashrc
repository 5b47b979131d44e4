# /etc/bash.bashrc: every interactive bash of the guest (Debian's bash
# reads it; /etc/profile sources it for login shells).
[ -z "$PS1" ] && return

# root@h1:~# : which guest a prompt belongs to, in a lab of several.
PS1='\u@\h:\w\$ '
# The consoles have no size of their own: the host sets it with
# `stty -F /dev/hvc0 rows R cols C`, which sends SIGWINCH; bash then
# rereads it after each command.
shopt -s checkwinsize
alias ls='ls --color=auto' ll='ls -l'
