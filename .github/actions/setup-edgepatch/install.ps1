# install.ps1 — install.sh for Windows runners: the same settings (EDGEPATCH_VERSION,
# EDGEPATCH_RELEASE_URL, EDGEPATCH_REPOSITORY, EDGEPATCH_TARGET, EDGEPATCH_INSTALL_DIR) and
# the same checks; installs edgepatch-<version>-x86_64-pc-windows-gnu.zip.
$ErrorActionPreference = 'Stop'
function Fail($msg) { Write-Error "setup-edgepatch: $msg"; exit 1 }

$version = if ($env:EDGEPATCH_VERSION) { $env:EDGEPATCH_VERSION } else { 'latest' }
$version = $version -replace '^v', ''
$target = if ($env:EDGEPATCH_TARGET) { $env:EDGEPATCH_TARGET } else { 'x86_64-pc-windows-gnu' }
$url = $env:EDGEPATCH_RELEASE_URL
if (-not $url) {
  if (-not $env:EDGEPATCH_REPOSITORY) { Fail 'set EDGEPATCH_REPOSITORY (owner/name) or EDGEPATCH_RELEASE_URL' }
  if ($version -eq 'latest') { $url = "https://github.com/$($env:EDGEPATCH_REPOSITORY)/releases/latest/download" }
  else { $url = "https://github.com/$($env:EDGEPATCH_REPOSITORY)/releases/download/v$version" }
}
$url = $url.TrimEnd('/')

$work = Join-Path ([System.IO.Path]::GetTempPath()) ([System.IO.Path]::GetRandomFileName())
New-Item -ItemType Directory -Path $work | Out-Null
try {
  $sums = Join-Path $work 'SHA256SUMS'
  Invoke-WebRequest -UseBasicParsing -Uri "$url/SHA256SUMS" -OutFile $sums
  # "<sha256>  edgepatch-<version>-<target>.zip"; for latest the version is the release's.
  $entries = Get-Content $sums | ForEach-Object { $f = $_ -split '\s+', 2; [pscustomobject]@{ Hash = $f[0]; Name = $f[1].TrimStart('*') } }
  if ($version -eq 'latest') {
    $entry = $entries | Where-Object { $_.Name -like "edgepatch-*-$target.zip" } | Select-Object -First 1
    if (-not $entry) { Fail "$url/SHA256SUMS lists no archive for $target" }
    $version = $entry.Name.Substring('edgepatch-'.Length, $entry.Name.Length - 'edgepatch-'.Length - "-$target.zip".Length)
  } else {
    $entry = $entries | Where-Object { $_.Name -eq "edgepatch-$version-$target.zip" } | Select-Object -First 1
    if (-not $entry) { Fail "$url/SHA256SUMS lists no edgepatch-$version-$target.zip" }
  }
  $archive = Join-Path $work $entry.Name
  Invoke-WebRequest -UseBasicParsing -Uri "$url/$($entry.Name)" -OutFile $archive
  $actual = (Get-FileHash -Algorithm SHA256 -Path $archive).Hash.ToLowerInvariant()
  if ($actual -ne $entry.Hash.ToLowerInvariant()) { Fail "$($entry.Name): SHA-256 $actual, but SHA256SUMS says $($entry.Hash); refusing to install it" }

  $cache = if ($env:RUNNER_TOOL_CACHE) { $env:RUNNER_TOOL_CACHE } else { Join-Path $env:LOCALAPPDATA 'edgepatch' }
  $dir = if ($env:EDGEPATCH_INSTALL_DIR) { $env:EDGEPATCH_INSTALL_DIR } else { Join-Path $cache "edgepatch\$version\$target" }
  New-Item -ItemType Directory -Force -Path $dir | Out-Null
  Expand-Archive -Path $archive -DestinationPath $work -Force
  Copy-Item (Join-Path $work "edgepatch-$version-$target\edgepatch.exe") (Join-Path $dir 'edgepatch.exe') -Force
  if ($env:GITHUB_PATH) { Add-Content -Path $env:GITHUB_PATH -Value $dir }
  if ($env:GITHUB_OUTPUT) { Add-Content -Path $env:GITHUB_OUTPUT -Value "version=$version", "path=$dir" }
  Write-Host "setup-edgepatch: edgepatch $version ($target) in $dir"
  Write-Output $dir
} finally {
  Remove-Item -Recurse -Force $work -ErrorAction SilentlyContinue
}
