// The single-file chat page served at GET / (chat_page.cpp).
#pragma once

#include <string_view>

namespace photon::server {

// The page's HTML (CSS and JS inline); static storage.
std::string_view chat_page_html() noexcept;

}  // namespace photon::server
